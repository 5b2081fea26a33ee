// Package openrath reads and writes OpenRath's (1.2.0) on-disk formats and
// maps them into the Rath Session Graph.
//
// # Persisted transcripts
//
// OpenRath's SessionWriter keeps one transcript per session in
// <config_dir>/sessions/<id>.jsonl: a header record (schema_version 1, id,
// created_at, parent_session_ids, lineage_operator, lineage_kind,
// lineage_extras, sandbox_backend, sandbox_spec, sandbox_handle_id), one
// chunk record per row (index, kind, payload), and a trailer (closed_at,
// final_chunk_count, cumulative_usage) written on close, after which the
// file is renamed from <id>.jsonl.__partial__ to <id>.jsonl. [Load] and
// [Read] read one file as OpenRath's load_session does; [LoadDir] and [List]
// read a directory as list_persisted_sessions does; [Writer] writes files
// OpenRath can load (same bytes, same locking and rename protocol).
//
// Where OpenRath 1.2.0 and its own documentation disagree this package
// follows the code, except where the code fails: a file is closed when a
// trailer was seen, whatever its name; an unterminated last line is
// dropped, also when the cut falls inside a multi-byte UTF-8 character
// (OpenRath raises UnicodeDecodeError there, and one such file aborts its
// whole listing; here it is read and listed).
//
// Chunk payloads are validated as Rath chunks ([session.NewChunk]); only
// OpenRath's four kinds (system, user, assistant, tool_result) exist in
// these files, and the payload shapes are the same in both systems.
//
// # Lineage exports
//
// OpenRath's export_jsonl writes one record per session: id,
// parent_session_ids, lineage_operator, lineage_kind, lineage_extras,
// chunk_count, cumulative_usage, in that key order, with Python's ", " and
// ": " separators and non-ASCII text raw. [ReadLineage] reads such files,
// accepting parents that are not in the file; [WriteLineage] writes them
// byte for byte as OpenRath does.
//
// # Mapping into the Session Graph
//
// [ImportPersisted] records a transcript as one root version with op
// import holding all its rows; [ImportLineage] records a lineage file as
// one version per record, with no chunks (the file has none) unless the
// caller supplies them, and in-file parents as graph parents. Both keep the
// OpenRath session id as the version id, so re-importing is a no-op, and
// keep everything OpenRath recorded that has no Version field as
// "openrath.*" extras, from which [LineageRecordOf] and [WriteSession]
// write it back out. OpenRath operators map to Rath ops as follows
// ([MapOperator]):
//
//	Session.fork          fork
//	Session.detach        detach
//	Session.merge         merge
//	run_session_loop      step
//	run_session_compress  compress
//	Session.create        create (also implicit, create_user_session, create_system_session)
//
// # Importing as a user
//
// rathctl session import reads these files through [Detect], which tells
// Rath session JSONL, a transcript and a lineage file apart by the first
// record's keys, and [ConvertTranscripts] or [ConvertLineage], which turn
// them into versions that [Converted.WriteJSONL] writes as one session
// JSONL file, imported all or nothing into a store or through the
// coordinator's API. Converted versions carry no key and no placement:
// OpenRath's sandbox stays in the openrath.sandbox_* extras (it says where
// the session ran, not where Rath should run it), so the import passes the
// API's key rule and the operator's sandbox policy. [PersistedOf] (behind
// rathctl session export --format openrath) writes a version's transcript
// back; for an imported transcript it gives the same file, without a
// trailer when the original had none.
//
// Usage maps field for field; OpenRath's null usage becomes zero usage,
// with the null kept in the extras. The sandbox backend, spec and handle id
// become the version's Placement (the handle id as Spec.HandleID).
package openrath
