package server

import "github.com/lineage-dev/lineage/api"

// The API's wire types live in package api, so that a client links none
// of the server; these names keep the server's code as it was.
type (
	OpenSession = api.OpenSession
	AddRoot     = api.AddRoot
	AddKeep     = api.AddKeep
	Session     = api.Session
	Root        = api.Root
	Member      = api.Member
	Keep        = api.Keep
	Ended       = api.Ended
	RootEnd     = api.RootEnd
	Outcome     = api.Outcome
	Error       = api.Error
	Status      = api.Status
	Why         = api.Why
	WhyStep     = api.WhyStep
)

// APIVersion is the version of the API, the /v1 of its paths.
const APIVersion = api.APIVersion

// The error codes, with the HTTP status each comes with.
const (
	CodeInvalid    = api.CodeInvalid
	CodeForbidden  = api.CodeForbidden
	CodeNotFound   = api.CodeNotFound
	CodeMethod     = api.CodeMethod
	CodeTimeout    = api.CodeTimeout
	CodeConflict   = api.CodeConflict
	CodeTooLarge   = api.CodeTooLarge
	CodeTooMany    = api.CodeTooMany
	CodeInternal   = api.CodeInternal
	CodeBadBackend = api.CodeBadBackend
)
