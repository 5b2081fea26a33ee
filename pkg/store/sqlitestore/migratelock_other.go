//go:build !unix

package sqlitestore

// lockMigrations is a no-op where flock is not available: processes
// migrating one file at once are not serialized there (Migrate within one
// process still is).
func lockMigrations(string) (func(), error) { return func() {}, nil }
