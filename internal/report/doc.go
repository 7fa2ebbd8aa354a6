// Package report turns a lineage record into a reconstructed tree of
// processes and renders it: as a pstree-like text tree, as JSON, as a
// self-contained HTML timeline and as Trace Event Format for Perfetto.
//
// [Build] reads a record once and keeps one [Process] per identity, never
// the record's lines, so that memory grows with the number of processes, not
// with the size of the record; the text, JSON and trace renderers then write
// process by process. What the record could not tell (a damaged line, lost
// events, a process whose end was never seen) is carried in the [Report] and
// printed by every renderer.
package report
