package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// MaxBody is the largest request body the server reads.
const MaxBody = 64 << 10

// maxKeeps bounds the keep rules a session opens with.
const maxKeeps = 256

// maxTTL bounds a keep's lifetime.
const maxTTL = 30 * 24 * time.Hour

// decodeBody reads one JSON object of at most MaxBody bytes into v,
// refusing unknown fields and trailing data. An empty body is an empty
// object.
func decodeBody(r io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		return fmt.Errorf("%w body: %w", lineage.ErrInvalid, err)
	}
	if len(data) > MaxBody {
		return errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body over %d bytes", MaxBody)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w body: %w", lineage.ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w body: trailing data after the object", lineage.ErrInvalid)
	}
	return nil
}

// checkKind refuses a runtime kind the API doesn't know: a typo must not
// quietly make a session interactive. Empty is interactive.
func checkKind(s string) error {
	if s == "" || s == policy.Interactive.String() || s == policy.Autonomous.String() {
		return nil
	}
	return fmt.Errorf("%w kind %.40q: want interactive or autonomous", lineage.ErrInvalid, s)
}

// parseKind reads a runtime kind the request decoders let through, or one
// from a saved state; empty and unknown count as interactive, so a
// session is never auto-killed for a kind this daemon doesn't know.
func parseKind(s string) policy.Kind {
	if s == policy.Autonomous.String() {
		return policy.Autonomous
	}
	return policy.Interactive
}

// checkNewSession checks what a request that may open a session says of
// it (POST /v1/sessions, and POST /v1/roots for a session it opens): its
// kind, label, owner and first keep rules.
func checkNewSession(kind, label string, owner *lineage.Identity, keep []policy.Keep) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if len(label) > 256 {
		return fmt.Errorf("%w label: over 256 bytes", lineage.ErrInvalid)
	}
	if owner != nil {
		if err := owner.Validate(); err != nil {
			return fmt.Errorf("owner: %w", err)
		}
	}
	if len(keep) > maxKeeps {
		return fmt.Errorf("%w keep: over %d rules", lineage.ErrInvalid, maxKeeps)
	}
	return nil
}

// DecodeOpenSession reads and checks the body of POST /v1/sessions.
func DecodeOpenSession(r io.Reader) (api.OpenSession, error) {
	var req api.OpenSession
	if err := decodeBody(r, &req); err != nil {
		return req, err
	}
	if req.ID != "" {
		if err := api.CheckSessionID(req.ID); err != nil {
			return req, err
		}
	}
	if req.Parent != "" {
		if err := api.CheckSessionID(req.Parent); err != nil {
			return req, err
		}
	}
	return req, checkNewSession(req.Kind, req.Label, req.Owner, req.Keep)
}

// DecodeAddRoot reads and checks the body of POST /v1/roots.
func DecodeAddRoot(r io.Reader) (api.AddRoot, error) {
	var req api.AddRoot
	if err := decodeBody(r, &req); err != nil {
		return req, err
	}
	if req.PID <= 1 || req.PID > 1<<22 {
		return req, fmt.Errorf("%w pid %d: want a process id above 1", lineage.ErrInvalid, req.PID)
	}
	if err := api.CheckSessionID(req.Session); err != nil {
		return req, err
	}
	return req, checkNewSession(req.Kind, req.Label, req.Owner, req.Keep)
}

// DecodeAddKeep reads and checks the body of POST /v1/keeps, and returns
// the identity, the rule and its lifetime (zero: no end).
func DecodeAddKeep(r io.Reader) (api.AddKeep, lineage.Identity, policy.Keep, time.Duration, error) {
	var req api.AddKeep
	fail := func(err error) (api.AddKeep, lineage.Identity, policy.Keep, time.Duration, error) {
		return req, lineage.Identity{}, policy.Keep{}, 0, err
	}
	if err := decodeBody(r, &req); err != nil {
		return fail(err)
	}
	id, err := lineage.ParseIdentity(req.Process)
	if err != nil {
		return fail(err)
	}
	keep, err := policy.KeepIdentity(id)
	if req.Root {
		keep, err = policy.KeepRoot(id)
	}
	if err != nil {
		return fail(err)
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > maxTTL {
			return fail(fmt.Errorf("%w ttl %q: want a positive duration up to %v", lineage.ErrInvalid, req.TTL, maxTTL))
		}
	}
	return req, id, keep, ttl, nil
}

// rootPrefix marks a keep rule on a root's whole lineage, exePrefix one on
// an executable.
const (
	rootPrefix = "root:"
	exePrefix  = "exe:"
)

// DecodeKeepRule reads the {rule} of DELETE /v1/keeps/{rule}: a keep rule
// as the API shows it, PID@START, root:PID@START or exe:PATH (its slashes
// URL-escaped). It returns the identity the rule names (zero for an exe
// rule) and the rule.
func DecodeKeepRule(s string) (lineage.Identity, policy.Keep, error) {
	if strings.HasPrefix(s, exePrefix) {
		rule, err := policy.ParseKeep(s)
		if err != nil {
			return lineage.Identity{}, policy.Keep{}, fmt.Errorf("keep rule %.80q: %w", s, err)
		}
		return lineage.Identity{}, rule, nil
	}
	text, root := strings.CutPrefix(s, rootPrefix)
	id, err := lineage.ParseIdentity(text)
	if err != nil {
		return lineage.Identity{}, policy.Keep{}, fmt.Errorf("keep rule %.80q: %w", s, err)
	}
	rule, err := policy.KeepIdentity(id)
	if root {
		rule, err = policy.KeepRoot(id)
	}
	if err != nil {
		return lineage.Identity{}, policy.Keep{}, err
	}
	return id, rule, nil
}
