package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/lineage-dev/lineage/lineage"
)

// JSONVersion is the version of the JSON report's layout.
const JSONVersion = 1

// jsonProcess is a Process as the JSON report writes it.
type jsonProcess struct {
	*Process
	// Lifetime is End - Start in nanoseconds.
	Lifetime int64 `json:"lifetime_ns"`
	// Children are the identities of the process's children, in start
	// order: each appears later in the list.
	Children []lineage.Identity `json:"children,omitempty"`
}

// WriteJSON writes the reconstructed tree as one JSON document: the header,
// summary, problems and unknowns, then "processes" in tree order (depth
// first, children in start order), each with its depth, lineage parent and
// children. It writes process by process, so its memory does not grow with
// the output.
func (rep *Report) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	head := struct {
		Version int `json:"report_version"`
		*Report
	}{JSONVersion, rep}
	b, err := json.Marshal(head)
	if err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	// Reopen the object to append the processes.
	bw.Write(b[:len(b)-1])
	bw.WriteString(`,"processes":[`)
	enc := json.NewEncoder(bw)
	first := true
	rep.Walk(func(p *Process) bool {
		if !first {
			bw.WriteByte(',')
		}
		first = false
		jp := jsonProcess{Process: p, Lifetime: int64(p.Lifetime())}
		for _, c := range p.children {
			jp.Children = append(jp.Children, c.ID)
		}
		err = enc.Encode(jp)
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
