package telemetry

// RedactAll is Redact without its filter, for the tests' comparison.
var RedactAll = redactAll
