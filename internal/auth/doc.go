// Package auth is Rath's API authentication and authorisation: scoped API
// tokens, the tenants they belong to, and the principal a request acts as.
//
// # Tokens
//
// A token is "rath_" followed by 43 base62 characters (256 random bits).
// The prefix lets secret scanners recognize a leaked token. The database
// keeps only the token's SHA-256 hash: a token is a high-entropy random
// value, not a password, so a slow password hash (bcrypt, argon2) adds no
// protection (nobody can search 2^256 inputs, fast or slow) while costing
// tens of milliseconds of CPU on every API request and ruling out an
// indexed lookup. A token is shown once, when it is created; it carries a
// scope, a tenant, an optional expiry, and records when it was last used
// (at most once a minute per token, so reads do not become writes) and
// when it was revoked.
//
// # Scopes
//
// Scopes are ordered: [ScopeAdmin] includes [ScopeSubmit], which includes
// [ScopeRead]. read may look (GET); submit may also create and change
// (runs, sessions, approvals); admin may also manage tokens and run the
// operator's operations (gc, redaction, verify).
//
// # Tenants
//
// Every token belongs to one tenant (a namespace: [DefaultTenant] unless
// named). A request acts as a [Principal] and sees only its tenant's
// objects; see docs/security.md for how the coordinator and Postgres
// row-level security enforce that.
//
// Nothing in this package logs a token, and errors never quote one.
package auth
