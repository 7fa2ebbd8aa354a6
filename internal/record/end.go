package record

// End records that the stream ends here, and why ("session S closed"):
// nothing follows it. Only the sidecar's event streams end so; a record
// file simply stops.
func (w *Writer) End(reason string) error {
	return w.now(Event{Kind: KindEnd, Reason: reason})
}
