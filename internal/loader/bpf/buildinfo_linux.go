package bpf

import "github.com/lineage-dev/lineage/internal/buildinfo"

// The objects this binary loads are part of its identity: reports and
// `lineage version` carry their digest.
func init() {
	buildinfo.AddBPFObject("lineage", _LineageBytes)
	buildinfo.AddBPFObject("lineagecompat", _LineageCompatBytes)
	buildinfo.AddBPFObject("inspect", _InspectBytes)
}
