package loader

import "github.com/lineage-dev/lineage/lineage"

// KernelKeeper is a [Sparer] whose kernel side applies keep rules itself,
// in the hook run where they apply, so that nothing the rules keep is
// killed in the kernel before user space reads the event (bpf):
//
//   - KeepExe: a member of root's lineage that execs file is spared in the
//     exec hook, and so are the processes it forks until they exec
//     another program (a kept redis's background save).
//   - KeepLineage: every process root's lineage forks from now on is born
//     spared, whatever it execs; the members it has are marked too.
//   - SpareProgram: as Spare, for a member spared for the program it runs
//     (an exe rule user space matched where the kernel did not): its forks
//     inherit the mark until they exec another program, and its own exec
//     of another program ends it. Spare's mark, by contrast, spares that
//     one process whatever it execs, and not its children.
//
// Forgetting root forgets its rules. Errors for a root that is not
// registered wrap ErrNotRoot; for a member that is not (or no longer) id,
// ErrNotMember.
type KernelKeeper interface {
	Sparer
	KeepExe(root lineage.Identity, file lineage.FileID) error
	KeepLineage(root lineage.Identity) error
	SpareProgram(id lineage.Identity) error
}
