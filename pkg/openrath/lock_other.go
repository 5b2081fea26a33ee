//go:build !unix

package openrath

import "os"

// lockFile is a no-op where flock does not exist: a second writer is not
// detected there.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
