//go:build !unix

package migratelock

// Lock is a no-op where flock is not available: processes migrating one
// file at once are not serialized there.
func Lock(string) (func(), error) { return func() {}, nil }
