// Package record is lineage's forensic record: the versioned event schema
// (shared with the sidecar's event stream), a [Writer] that appends events as
// they happen, and a [Reader] that reads a record back however damaged it is.
//
// A record is JSON Lines: a [Header] on the first line, then one [Event] a
// line. docs/record.md describes every field. The Writer is safe for
// concurrent use and masks argv words matching a redaction pattern before
// anything reaches the file; the Reader never panics on bad input, skips what
// it can't read and says which line and why in its [Problem] list.
package record
