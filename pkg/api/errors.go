package api

// ErrorResponse is the body of every error reply:
// {"error": {"code": "...", "message": "..."}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: a stable Code (one of the Code…
// constants) and a Message for people.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes, with the HTTP status each comes with.
const (
	CodeBadRequest   = "bad_request"  // 400
	CodeUnauthorized = "unauthorized" // 401
	CodeForbidden    = "forbidden"    // 403
	CodeNotFound     = "not_found"    // 404
	CodeConflict     = "conflict"     // 409
	// CodeNondeterministic: a re-executed workflow puts a step key with
	// another input or call than recorded (flow.ErrNondeterministic).
	CodeNondeterministic = "nondeterministic"  // 409
	CodeTooLarge         = "too_large"         // 413
	CodeTooManyRequests  = "too_many_requests" // 429
	CodeInternal         = "internal"          // 500
	CodeNotImplemented   = "not_implemented"   // 501
	CodeUnavailable      = "unavailable"       // 503
)
