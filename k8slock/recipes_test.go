package k8slock

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The recipes under deploy/ are checked here, where the Kubernetes API
// types are at hand: no API server could be run on this project's
// machine (docs/kubernetes.md says why), so the manifest is decoded
// strictly into the API's own types (an unknown or misspelled field, a
// wrong type fails), its names checked by the API's validation rules,
// and what ties its parts together (labels, ports, the grace period
// sized from the intervals) checked below.

// releaseBound is the longest a release takes after -grace, as
// docs/operations.md gives it: one write under the retry policy, at most
// 3 × FrequentInterval + 1.1s, twice that when a renewal cut short must
// be checked first.
func releaseBound(frequent time.Duration) time.Duration {
	return 2 * (3*frequent + 1100*time.Millisecond)
}

// runFlags returns the value of each -name=value or "-name value" flag
// of an `s3lect run` command line, up to "--".
func runFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
			i++
		}
		flags[name] = value
	}
	return flags
}

func durationFlag(t *testing.T, flags map[string]string, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := flags[name]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("-%s=%q: %v", name, v, err)
	}
	return d
}

func TestKubernetesRecipeDecodesStrictlyAndHangsTogether(t *testing.T) {
	data, err := os.ReadFile("../deploy/kubernetes/s3lect-run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	var dep *appsv1.Deployment
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		var obj any
		switch tm.Kind {
		case "Service":
			svc = &corev1.Service{}
			obj = svc
		case "Deployment":
			dep = &appsv1.Deployment{}
			obj = dep
		default:
			t.Fatalf("unexpected kind %q", tm.Kind)
		}
		// As the API server decodes: field names case-sensitive, no
		// unknown or duplicate fields.
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil || len(strict) > 0 {
			t.Fatalf("%s does not decode strictly into the API type: %v %v", tm.Kind, err, strict)
		}
	}
	if svc == nil || dep == nil {
		t.Fatalf("want a Service and a Deployment; got %v and %v", svc != nil, dep != nil)
	}
	for _, name := range []string{svc.Name, dep.Name, dep.Spec.Template.Spec.ServiceAccountName} {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("name %q: %v", name, errs)
		}
	}

	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP = %q; want None (headless)", svc.Spec.ClusterIP)
	}
	labels := dep.Spec.Template.Labels
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("Service selects %s=%s; the pods are labelled %v", k, v, labels)
		}
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("Deployment selects %s=%s; its pods are labelled %v", k, v, labels)
		}
	}

	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("args %q; want s3lect run", c.Args)
	}
	flags := runFlags(t, c.Args[1:])
	if flags["id"] != "$(POD_NAME)" {
		t.Errorf("-id = %q; want $(POD_NAME), the pod's name", flags["id"])
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" {
		t.Errorf("POD_NAME comes from %q; want metadata.name", env["POD_NAME"])
	}
	if addr, ok := flags["peer-addr"]; ok {
		if env["POD_IP"] != "status.podIP" || !strings.HasPrefix(addr, "$(POD_IP):") {
			t.Errorf("-peer-addr = %q with POD_IP from %q; want $(POD_IP):port with POD_IP from status.podIP", addr, env["POD_IP"])
		}
		port := strings.TrimPrefix(addr, "$(POD_IP):")
		var found bool
		for _, p := range c.Ports {
			if p.Name == "peer" && port == strconv.Itoa(int(p.ContainerPort)) {
				found = true
			}
		}
		if !found {
			t.Errorf("-peer-addr port %s is not the container's port named peer %v", port, c.Ports)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "peer" {
			t.Errorf("Service ports %v; want one targeting the port named peer", svc.Spec.Ports)
		}
	}

	grace := durationFlag(t, flags, "grace", 10*time.Second)
	need := grace + releaseBound(durationFlag(t, flags, "frequent", 5*time.Second))
	switch tgp := pod.TerminationGracePeriodSeconds; {
	case tgp == nil:
		t.Errorf("no terminationGracePeriodSeconds; want at least -grace + the release's bound = %v", need)
	case time.Duration(*tgp)*time.Second < need:
		t.Errorf("terminationGracePeriodSeconds %d; want at least -grace + the release's bound = %v", *tgp, need)
	default:
		t.Logf("terminationGracePeriodSeconds %d ≥ -grace %v + release bound %v", *tgp, grace, need-grace)
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v; want runAsNonRoot and a non-zero runAsUser", sc)
	}
}

func TestSystemdRecipeStopsAfterTheRelease(t *testing.T) {
	data, err := os.ReadFile("../deploy/systemd/nightly-report.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = v
		}
	}
	args := strings.Fields(unit["ExecStart"])
	if len(args) < 2 || args[1] != "run" {
		t.Fatalf("ExecStart %q; want s3lect run", unit["ExecStart"])
	}
	flags := runFlags(t, args[2:])
	need := durationFlag(t, flags, "grace", 10*time.Second) + releaseBound(durationFlag(t, flags, "frequent", 5*time.Second))
	stop, err := time.ParseDuration(unit["TimeoutStopSec"] + "s")
	if err != nil || stop < need {
		t.Errorf("TimeoutStopSec=%s; want at least -grace + the release's bound = %v", unit["TimeoutStopSec"], need)
	}
	if unit["KillMode"] != "mixed" || unit["KillSignal"] != "SIGTERM" {
		t.Errorf("KillMode=%s KillSignal=%s; want mixed and SIGTERM: s3lect alone gets SIGTERM and forwards it after ordering the drain", unit["KillMode"], unit["KillSignal"])
	}
	if flags["id"] != "%H" {
		t.Errorf("-id %q; want %%H, the host name", flags["id"])
	}
}
