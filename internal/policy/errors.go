package policy

import "errors"

// ErrInvalid is wrapped by every error about a value policy can't accept: an
// unknown runtime kind, event or kill-switch setting, a malformed keep rule,
// or incomplete facts about the caller. Check it with [errors.Is].
var ErrInvalid = errors.New("invalid")
