package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// badInput reports whether err is what bad input must give: invalid, or
// too large.
func badInput(err error) bool {
	var ae *apiError
	return errors.Is(err, lineage.ErrInvalid) || (errors.As(err, &ae) && ae.code == api.CodeTooLarge)
}

func TestDecodeAddRoot(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"pid":42,"session":"a"}`, true},
		{`{"pid":42,"start":7,"session":"a.b-c_d","kind":"autonomous","label":"x","command":["sh"]}`, true},
		{``, false},
		{`{}`, false},
		{`{"pid":42}`, false},
		{`{"pid":1,"session":"a"}`, false},
		{`{"pid":0,"session":"a"}`, false},
		{`{"pid":-1,"session":"a"}`, false},
		{`{"pid":42,"session":"-a"}`, false},
		{`{"pid":42,"session":"a/b"}`, false},
		{`{"pid":42,"session":"` + strings.Repeat("a", 65) + `"}`, false},
		{`{"pid":42,"session":"a","bogus":true}`, false},
		{`{"pid":42,"session":"a","kind":"bogus"}`, false},
		{`{"pid":42,"session":"a","kind":"Autonomous"}`, false},
		{`{"pid":42,"session":"a","kind":"interactive"}`, true},
		{`{"pid":42,"session":"a"}{}`, false},
		{`{"pid":42,"session":"a","label":"` + strings.Repeat("l", 257) + `"}`, false},
		{`{"pid":` + strings.Repeat(" ", MaxBody) + `42}`, false},
	} {
		_, err := DecodeAddRoot(strings.NewReader(c.body))
		if c.ok && err != nil {
			t.Errorf("%.50q: %v", c.body, err)
		}
		if !c.ok && !badInput(err) {
			t.Errorf("%.50q: error %v, want invalid or too large", c.body, err)
		}
	}
}

func TestDecodeOpenSessionAndKeep(t *testing.T) {
	if _, err := DecodeOpenSession(strings.NewReader(`{"id":"s1","kind":"interactive","owner":{"pid":5,"start":9}}`)); err != nil {
		t.Error(err)
	}
	for _, body := range []string{`{"id":"s 1"}`, `{"kind":"whatever"}`, `{"kind":"autonomous "}`, `{"owner":{"pid":1,"start":9}}`, `{"owner":{"pid":5}}`, `{"parent":"../x"}`} {
		if _, err := DecodeOpenSession(strings.NewReader(body)); !badInput(err) {
			t.Errorf("%q: %v, want invalid", body, err)
		}
	}
	if _, _, _, ttl, err := DecodeAddKeep(strings.NewReader(`{"process":"5@9","root":true,"ttl":"1h"}`)); err != nil || ttl.Hours() != 1 {
		t.Errorf("keep: %v %v", ttl, err)
	}
	for _, body := range []string{`{"process":"5"}`, `{"process":"1@5"}`, `{"process":"5@9","ttl":"0s"}`, `{"process":"5@9","ttl":"9999h"}`} {
		if _, _, _, _, err := DecodeAddKeep(strings.NewReader(body)); !badInput(err) {
			t.Errorf("%q: %v, want invalid", body, err)
		}
	}
}

// The decoders accept only what they can vouch for, and fail only with
// bad-input errors.
func FuzzDecodeAddRoot(f *testing.F) {
	f.Add([]byte(`{"pid":42,"start":7,"session":"a","kind":"autonomous"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeAddRoot(strings.NewReader(string(body)))
		if err != nil {
			if !badInput(err) {
				t.Fatalf("error %v is not bad input", err)
			}
			return
		}
		if req.PID <= 1 || api.CheckSessionID(req.Session) != nil || checkKind(req.Kind) != nil {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func FuzzDecodeOpenSession(f *testing.F) {
	f.Add([]byte(`{"id":"s","kind":"interactive","parent":"p","owner":{"pid":9,"start":3}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeOpenSession(strings.NewReader(string(body)))
		if err != nil {
			if !badInput(err) {
				t.Fatalf("error %v is not bad input", err)
			}
			return
		}
		if req.Owner != nil && req.Owner.Validate() != nil {
			t.Fatalf("accepted owner %+v", req.Owner)
		}
		if checkKind(req.Kind) != nil {
			t.Fatalf("accepted kind %q", req.Kind)
		}
	})
}

func FuzzDecodeAddKeep(f *testing.F) {
	f.Add([]byte(`{"process":"5@9","root":true,"ttl":"30m"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, id, rule, ttl, err := DecodeAddKeep(strings.NewReader(string(body)))
		if err != nil {
			if !badInput(err) {
				t.Fatalf("error %v is not bad input", err)
			}
			return
		}
		if id.Validate() != nil || rule.String() == "" || ttl < 0 || ttl > maxTTL {
			t.Fatalf("accepted %v %v %v", id, rule, ttl)
		}
	})
}

func TestDecodeKeepRule(t *testing.T) {
	for in, want := range map[string]string{"5@9": "5@9", "root:5@9": "root:5@9", "exe:/bin/sh": "exe:/bin/sh", "exe:/usr/bin/redis-server": "exe:/usr/bin/redis-server"} {
		if _, rule, err := DecodeKeepRule(in); err != nil || rule.String() != want {
			t.Errorf("%q: %v %v, want %s", in, rule, err, want)
		}
	}
	for _, in := range []string{"", "5", "5@0", "1@9", "root:", "root:1@9", "root:root:5@9", "exe:", "exe:bin/sh", "exe:/bin/../bin/sh", "exe:/bin/", "root:exe:/bin/sh", "5@9x", " 5@9"} {
		if _, _, err := DecodeKeepRule(in); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%q: %v, want invalid", in, err)
		}
	}
}

func FuzzDecodeKeepRule(f *testing.F) {
	f.Add("root:5@9")
	f.Add("exe:/usr/bin/redis-server")
	f.Fuzz(func(t *testing.T, s string) {
		id, rule, err := DecodeKeepRule(s)
		if err != nil {
			if !errors.Is(err, lineage.ErrInvalid) {
				t.Fatalf("error %v is not bad input", err)
			}
			return
		}
		if strings.HasPrefix(s, exePrefix) {
			if !id.IsZero() || rule.String() != s {
				t.Fatalf("accepted %q as %v %v", s, id, rule)
			}
			return
		}
		if id.Validate() != nil || (rule.String() != id.String() && rule.String() != rootPrefix+id.String()) {
			t.Fatalf("accepted %q as %v %v", s, id, rule)
		}
	})
}

func TestDecodeRunFields(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"pid":42,"session":"a","owner":{"pid":7,"start":9},"keep":["exe:/usr/bin/redis-server","7@9","root:7@9"]}`, true},
		{`{"pid":42,"session":"a","keep":["exe:relative"]}`, false},
		{`{"pid":42,"session":"a","keep":["nonsense"]}`, false},
		{`{"pid":42,"session":"a","owner":{"pid":1,"start":9}}`, false},
	} {
		_, err := DecodeAddRoot(strings.NewReader(c.body))
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.body, err)
		}
		if !c.ok && !badInput(err) {
			t.Errorf("%s: %v, want invalid", c.body, err)
		}
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"event":"root-exit"}`, true},
		{`{"event":"deadline","reaping_off":true,"reaping_by":"LINEAGE_REAPING=off","linger_ns":1,"grace_ns":2,"timeout_ns":3,"close":true}`, true},
		{`{}`, false},
		{`{"event":"turn-end"}`, false},
		{`{"event":"session-close"}`, false},
		{`{"event":"root-exit","grace_ns":-1}`, false},
		{`{"event":"root-exit","reaping_by":"` + strings.Repeat("b", 257) + `"}`, false},
		{`{"event":"root-exit","bogus":1}`, false},
	} {
		_, _, err := DecodeEndRoot(strings.NewReader(c.body))
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.body, err)
		}
		if !c.ok && !badInput(err) {
			t.Errorf("%s: %v, want invalid", c.body, err)
		}
	}
}
