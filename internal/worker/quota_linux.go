//go:build linux

package worker

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// mountQuota mounts a tmpfs of size bytes on dir (root only: a worker
// without CAP_SYS_ADMIN gets EPERM). The tmpfs is nosuid and nodev, and
// owned by the worker until a backend hands it to the sandbox's user.
func mountQuota(dir string, bytes int64) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("mount a %d-byte tmpfs on %s: %w", bytes, dir, errQuotaUnsupported)
	}
	opts := fmt.Sprintf("size=%d,mode=0700", bytes)
	if err := syscall.Mount("rath-ws", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount a %d-byte tmpfs on %s: %w", bytes, dir, err)
	}
	return nil
}

// unmountQuota detaches the tmpfs on dir, freeing its contents.
func unmountQuota(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount workspace tmpfs %s: %w", dir, err)
	}
	return nil
}
