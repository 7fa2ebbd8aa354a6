package record

import "github.com/lineage-dev/lineage/lineage"

// redactArgv is lineage.RedactArgv with the writer's pattern.
func (w *Writer) redactArgv(argv []string) ([]string, bool) {
	return lineage.RedactArgv(w.opts.Redact, argv)
}

func (w *Writer) redact(argv []string) []string {
	out, _ := w.redactArgv(argv)
	return out
}
