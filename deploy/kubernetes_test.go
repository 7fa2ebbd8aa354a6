package deploy

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const daemonSetFile = "kubernetes/daemonset.yaml"

// decodeDaemonSet decodes raw as the API server does, strictly: field
// names match case-sensitively, and an unknown or duplicated field is an
// error, so a misspelt field can't pass unnoticed.
func decodeDaemonSet(raw []byte) (*appsv1.DaemonSet, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, err
	}
	var ds appsv1.DaemonSet
	strict, err := kjson.UnmarshalStrict(js, &ds, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return &ds, nil
}

func TestDaemonSetDecodesStrictly(t *testing.T) {
	raw, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := decodeDaemonSet(raw)
	if err != nil {
		t.Fatalf("%s: %v", daemonSetFile, err)
	}
	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" {
		t.Errorf("apiVersion %q kind %q, want apps/v1 DaemonSet", ds.APIVersion, ds.Kind)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s does not select the pod template", k, v)
		}
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		t.Error("hostPID is off: the BPF backend needs the host's pids")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the container is not privileged")
	}
	checkMounts(t, pod, c)
	checkProbe(t, c)
	checkMetrics(t, c)
}

// checkMounts: bpffs and /run/lineage from the host, /sys/kernel/btf
// readable.
func checkMounts(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	hostPaths := map[string]string{} // volume name → host path
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]corev1.VolumeMount{} // host path → mount
	for _, m := range c.VolumeMounts {
		if hp, ok := hostPaths[m.Name]; ok {
			mounted[hp] = m
		}
	}
	for _, path := range []string{"/sys/fs/bpf", "/run/lineage", "/sys/kernel/btf", "/var/lib/lineage"} {
		m, ok := mounted[path]
		if !ok || m.MountPath != path {
			t.Errorf("host path %s is not mounted at %s: %+v", path, path, m)
		}
	}
	if m := mounted["/sys/fs/bpf"]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Error("bpffs: pins made in the container must show on the host (mountPropagation: Bidirectional)")
	}
	if m := mounted["/run/lineage"]; m.ReadOnly {
		t.Error("/run/lineage is read-only: the daemon makes its socket there")
	}
}

// checkProbe: an exec readiness probe that runs `lineage status` on the
// daemon's socket.
func checkProbe(t *testing.T, c corev1.Container) {
	t.Helper()
	p := c.ReadinessProbe
	if p == nil || p.Exec == nil {
		t.Fatal("no exec readiness probe")
	}
	cmd := p.Exec.Command
	if len(cmd) < 2 || cmd[0] != c.Command[0] || cmd[1] != "status" {
		t.Errorf("readiness probe %q: want %s status", cmd, c.Command[0])
	}
	if !slices.Contains(cmd, "--socket=/run/lineage/lineage.sock") || !slices.Contains(c.Args, "--socket=/run/lineage/lineage.sock") {
		t.Errorf("the probe %q and the daemon %q name different sockets", cmd, c.Args)
	}
}

// checkMetrics: metrics served on a TCP port the pod declares.
func checkMetrics(t *testing.T, c corev1.Container) {
	t.Helper()
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q: want serve ...", c.Args)
	}
	i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--metrics-listen=") })
	if i < 0 {
		t.Fatalf("args %q: no --metrics-listen", c.Args)
	}
	addr := strings.TrimPrefix(c.Args[i], "--metrics-listen=")
	declared := false
	for _, p := range c.Ports {
		if p.Protocol == corev1.ProtocolTCP && strings.HasSuffix(addr, ":"+strconv.Itoa(int(p.ContainerPort))) {
			declared = true
		}
	}
	if !declared {
		t.Errorf("--metrics-listen=%s: the container declares no such TCP port: %+v", addr, c.Ports)
	}
}

// The strict decoding is what catches a misspelt field: the same manifest
// with one is refused.
func TestDaemonSetStrictDecodingRefusesUnknownFields(t *testing.T) {
	raw, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"hostPID: true", "hostPid: true"},
		{"readOnly: true", "readonly: true"},
		{"privileged: true", "privileged: true\n            privilegd: true"},
		{"hostPID: true", "hostPID: true\n      hostPID: false"},
	} {
		bad := bytes.Replace(raw, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, raw) {
			t.Fatalf("%q is not in the manifest", c.from)
		}
		if _, err := decodeDaemonSet(bad); err == nil {
			t.Errorf("%q instead of %q was accepted", c.to, c.from)
		}
	}
}
