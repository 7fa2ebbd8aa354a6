package server

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lineage-dev/lineage/internal/tracker"
)

var (
	descTracked = prometheus.NewDesc("lineage_tracked_processes",
		"Live processes tracked, across all roots.", nil, nil)
	descRoots = prometheus.NewDesc("lineage_roots",
		"Registered roots.", nil, nil)
	descSessions = prometheus.NewDesc("lineage_sessions",
		"Open sessions.", nil, nil)
	descLost = prometheus.NewDesc("lineage_events_lost_total",
		"Events the kernel dropped because the ring buffer was full (membership stays exact; the record and event streams have gaps).", nil, nil)
	descUntracked = prometheus.NewDesc("lineage_untracked_processes_total",
		"New processes not tracked because the membership map was full (killed or escaped, as --on-full says).", nil, nil)
	descUIDSpared = prometheus.NewDesc("lineage_kernel_kills_spared_total",
		"Kills the kernel side skipped because the invoking user could not have sent them with kill(2) (a setcap install; always 0 as root).", nil, nil)
	descHookMisses = prometheus.NewDesc("lineage_hook_misses_total",
		"Runs of the tracker's programs the kernel skipped (a hook fired on a CPU where it already ran: kernels whose tracepoints run preemptible).", nil, nil)
	descForkMisses = prometheus.NewDesc("lineage_fork_hook_misses_total",
		"Forks the first fork hook missed: caught by the second, adopted from /proc, or escaped unseen.", nil, nil)
	descForksCaught = prometheus.NewDesc("lineage_forks_caught_total",
		"Members the second fork hook inserted for forks the first missed.", nil, nil)
	descAdopted = prometheus.NewDesc("lineage_adopted_processes_total",
		"Processes no fork hook saw, adopted from /proc: by their live parent (parent), or as an orphan of a root's orphanage (orphanage).", []string{"from"}, nil)
	descUnattributed = prometheus.NewDesc("lineage_unattributed_orphans_total",
		"Orphans an orphanage inherited, whose fork no hook or poll saw, that no one root could claim: they escaped.", nil, nil)
	descMapEntries = prometheus.NewDesc("lineage_members_map_entries",
		"Entries in the bpf backend's membership map.", nil, nil)
	descMapCapacity = prometheus.NewDesc("lineage_members_map_capacity",
		"Capacity of the bpf backend's membership map (--max-members).", nil, nil)
)

// stateCollector reads the daemon's state and the tracker's counters at
// each scrape: nothing is kept twice, so nothing drifts.
type stateCollector struct{ s *Server }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTracked, descRoots, descSessions, descLost, descUntracked, descUIDSpared,
		descHookMisses, descForkMisses, descForksCaught, descAdopted, descUnattributed, descMapEntries, descMapCapacity} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.reg.mu.Lock()
	sessions, roots := len(s.reg.sessions), 0
	jobs := []*tracker.Job{}
	for _, se := range s.reg.sessions {
		roots += len(se.roots)
		for _, rt := range se.roots {
			jobs = append(jobs, rt.job)
		}
	}
	s.reg.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(sessions))
	ch <- prometheus.MustNewConstMetric(descRoots, prometheus.GaugeValue, float64(roots))
	if st, err := s.tracker.Stats(); err != nil {
		for _, d := range []*prometheus.Desc{descLost, descUntracked, descUIDSpared, descHookMisses, descForkMisses, descForksCaught, descAdopted, descUnattributed} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	} else {
		ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(st.EventsLost))
		ch <- prometheus.MustNewConstMetric(descUntracked, prometheus.CounterValue, float64(st.MembersFull))
		ch <- prometheus.MustNewConstMetric(descUIDSpared, prometheus.CounterValue, float64(st.UIDSpared))
		ch <- prometheus.MustNewConstMetric(descHookMisses, prometheus.CounterValue, float64(st.HookMisses))
		ch <- prometheus.MustNewConstMetric(descForkMisses, prometheus.CounterValue, float64(st.ForkMisses))
		ch <- prometheus.MustNewConstMetric(descForksCaught, prometheus.CounterValue, float64(st.ForksCaught))
		byParent := st.AdoptedAfterMiss - min(st.AdoptedOrphans, st.AdoptedAfterMiss)
		ch <- prometheus.MustNewConstMetric(descAdopted, prometheus.CounterValue, float64(byParent), "parent")
		ch <- prometheus.MustNewConstMetric(descAdopted, prometheus.CounterValue, float64(st.AdoptedOrphans), "orphanage")
		ch <- prometheus.MustNewConstMetric(descUnattributed, prometheus.CounterValue, float64(st.Unattributed))
	}
	members, capacity, err := s.tracker.Fill()
	switch {
	case err == nil:
		ch <- prometheus.MustNewConstMetric(descMapEntries, prometheus.GaugeValue, float64(members))
		ch <- prometheus.MustNewConstMetric(descMapCapacity, prometheus.GaugeValue, float64(capacity))
		ch <- prometheus.MustNewConstMetric(descTracked, prometheus.GaugeValue, float64(members))
	case errors.Is(err, tracker.ErrNoFill):
		// The proc backend: count each root's members.
		n := 0
		for _, j := range jobs {
			if ms, err := j.Members(); err == nil {
				n += len(ms)
			}
		}
		ch <- prometheus.MustNewConstMetric(descTracked, prometheus.GaugeValue, float64(n))
	default:
		ch <- prometheus.NewInvalidMetric(descTracked, err)
	}
}
