//go:build !linux

package worker

import "fmt"

func mountQuota(dir string, bytes int64) error {
	return fmt.Errorf("mount a %d-byte tmpfs on %s: %w", bytes, dir, errQuotaUnsupported)
}

func unmountQuota(string) error { return nil }
