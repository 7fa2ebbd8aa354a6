package bpf

import (
	"context"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// Stats implements Backend.
func (b *Tracker) Stats() (loader.Stats, error) {
	st := loader.Stats{Undecodable: b.undecodable.Load()}
	fields := map[lineageStat]*uint64{
		lineageStatSTAT_EVENTS_LOST:      &st.EventsLost,
		lineageStatSTAT_MEMBERS_FULL:     &st.MembersFull,
		lineageStatSTAT_FORKS:            &st.Forks,
		lineageStatSTAT_EXECS:            &st.Execs,
		lineageStatSTAT_EXITS:            &st.Exits,
		lineageStatSTAT_CONTAINED:        &st.Contained,
		lineageStatSTAT_SUPERVISOR_KILLS: &st.SupervisorKills,
		lineageStatSTAT_SIGNAL_FAILED:    &st.SignalFailed,
		lineageStatSTAT_STALE:            &st.Stale,
		lineageStatSTAT_UNTRACKED_KILLED: &st.UntrackedKilled,
		lineageStatSTAT_UID_SPARED:       &st.UIDSpared,
		lineageStatSTAT_FORKS_CAUGHT:     &st.ForksCaught,
		lineageStatSTAT_KEPT_AT_EXEC:     &st.KeptAtExec,
	}
	var early uint64
	fields[lineageStatSTAT_CAUGHT_EARLY] = &early
	for key, dst := range fields {
		var perCPU []uint64
		if err := b.objs.Stats.Lookup(key, &perCPU); err != nil {
			return loader.Stats{}, fmt.Errorf("read stats: %w", err)
		}
		for _, v := range perCPU {
			*dst += v
		}
	}
	// Forks the second hook ran first for (another user of the tracepoint
	// registered its probe before) were not skipped by the first.
	st.ForksCaught -= min(early, st.ForksCaught)
	for _, p := range []*ebpf.Program{b.objs.HandleFork, b.objs.HandleExec, b.objs.HandleExit, b.objs.CatchFork} {
		if p == nil {
			continue // a Handoff holds maps only; the second fork hook may not run
		}
		ps, err := p.Stats()
		if err != nil {
			return loader.Stats{}, fmt.Errorf("read program stats: %w", err)
		}
		st.HookMisses += ps.RecursionMisses
		switch p {
		case b.objs.HandleFork:
			st.ForkMisses = ps.RecursionMisses
		case b.objs.CatchFork:
			st.CatcherMisses = ps.RecursionMisses
		}
	}
	st.AdoptedAfterMiss = b.adopted.Load()
	st.AdoptedOrphans = b.orphans.Load()
	st.Unattributed = b.unattributedCount.Load()
	return st, nil
}

// Run implements Backend. It reads the ring buffer on a thread of its own
// (drain) and decodes and delivers what that read from this goroutine.
func (b *Tracker) Run(ctx context.Context, fn func(lineage.Event)) error {
	// Wake the reader as soon as ctx is done, rather than at its next poll.
	stop := context.AfterFunc(ctx, func() { _ = b.reader.Flush() })
	defer stop()
	// A Sync that began before a read that finds the ring empty is done.
	defer b.syncs.release(^uint64(0))
	q := newBatches()
	drained := make(chan error, 1)
	go func() { drained <- b.drain(ctx, q) }()
	deliver := func(raw []byte) {
		ev, err := decode(raw)
		if err != nil {
			// Only a mismatch between this binary and the loaded
			// objects can cause it: count it, never fail on it.
			b.undecodable.Add(1)
			return
		}
		fn(ev)
	}
	for bt := range q.full {
		bt.records(deliver)
		if bt.empty {
			b.syncs.release(bt.synced)
		}
		q.put(bt)
	}
	return <-drained
}
