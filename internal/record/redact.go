package record

// redactArgv returns argv with every match of the redaction pattern masked,
// and whether anything was. argv itself is never changed.
func (w *Writer) redactArgv(argv []string) ([]string, bool) {
	if w.opts.Redact == nil {
		return argv, false
	}
	out := make([]string, len(argv))
	masked := false
	for i, a := range argv {
		out[i] = w.opts.Redact.ReplaceAllLiteralString(a, Mask)
		masked = masked || out[i] != a
	}
	return out, masked
}

func (w *Writer) redact(argv []string) []string {
	out, _ := w.redactArgv(argv)
	return out
}
