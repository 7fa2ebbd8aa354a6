package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/lineage-dev/lineage/api"
)

// A Command's session: looked up, opened when missing, and refused when
// another uid opened it.

// ensureSession opens session with kind unless it exists. A session
// another uid opened is refused, as a conflict: its roots would be its
// opener's, so lineage exec would refuse to run the command in it.
func (c *Client) ensureSession(ctx context.Context, session, kind string) error {
	s, err := c.Session(ctx, session)
	var ae *APIError
	if err == nil {
		return ownSession(s)
	}
	if !errors.As(err, &ae) || ae.Body.Code != api.CodeNotFound {
		return err
	}
	_, err = c.OpenSession(ctx, api.OpenSession{ID: session, Kind: kind})
	if !errors.As(err, &ae) || ae.Body.Code != api.CodeConflict {
		return err
	}
	// Opened meanwhile: by another caller of ours, fine; by another uid,
	// whose session this caller can't see (or, as root, can), refused.
	s, lookErr := c.Session(ctx, session)
	if errors.As(lookErr, &ae) && ae.Body.Code == api.CodeNotFound {
		return err
	}
	if lookErr != nil {
		return lookErr
	}
	return ownSession(s)
}

// ownSession refuses s unless this process's effective uid opened it.
func ownSession(s api.Session) error {
	if uid := uint32(os.Geteuid()); s.UID != uid {
		return &APIError{Status: http.StatusConflict, Body: api.Error{
			Code:  api.CodeConflict,
			Error: fmt.Sprintf("session %q was opened by uid %d: its roots are its opener's, so nothing runs (as root, lineage exec --join joins it)", s.ID, s.UID),
		}}
	}
	return nil
}
