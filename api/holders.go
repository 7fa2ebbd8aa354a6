package api

import (
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// MaxHolderPipes bounds the pipes and sockets one GET
// /v1/roots/{id}/holders names.
const MaxHolderPipes = 16

// MaxHolderMembers bounds the members whose descriptors one holders
// request reads; past it the answer says Truncated.
const MaxHolderMembers = 1024

// MaxHolderFDs bounds the descriptors read per member.
const MaxHolderFDs = 4096

// Holders is the body of GET /v1/roots/{id}/holders?pipe=INODE,...: the
// live members of the root's lineage that hold any of the pipes, found by
// the pipe's inode among the links of their /proc/PID/fd; or, with
// socket=INODE, the other end of the caller's Unix socket INODE (a
// socketpair, as Node's child_process makes a child's stdio of).
type Holders struct {
	Root lineage.Identity `json:"root"`
	// Pipes and Sockets are the inodes asked about, in the order given.
	Pipes   []uint64 `json:"pipes"`
	Sockets []uint64 `json:"sockets,omitempty"`
	// Holders are the members that hold one of the pipes, in identity
	// order.
	Holders []Holder `json:"holders"`
	// Scanned is how many members' descriptors were read; Truncated is set
	// when the lineage had more than MaxHolderMembers, or a member more
	// than MaxHolderFDs descriptors, and some were not read.
	Scanned   int  `json:"scanned"`
	Truncated bool `json:"truncated,omitempty"`
}

// Holder is one member holding one or more of the pipes.
type Holder struct {
	Process lineage.Identity `json:"process"`
	Parent  lineage.Identity `json:"parent"`
	Comm    string           `json:"comm,omitempty"`
	Argv    []string         `json:"argv,omitempty"`
	Age     time.Duration    `json:"age_ns"`
	// FDs are the member's descriptors that are one of the pipes.
	FDs []HeldFD `json:"fds"`
}

// HeldFD is one descriptor of a holder and the pipe it is, or the socket
// asked about whose other end it is.
type HeldFD struct {
	FD     int    `json:"fd"`
	Pipe   uint64 `json:"pipe,omitempty"`
	Socket uint64 `json:"socket,omitempty"`
}

// Arm is the body of POST /v1/arms: arm the calling process for Session
// (opened with Kind and Label when it doesn't exist).
type Arm struct {
	Session string `json:"session"`
	Kind    string `json:"kind,omitempty"`
	Label   string `json:"label,omitempty"`
}

// Armed is the answer of POST and DELETE /v1/arms: the calling process,
// the session what it forks becomes roots of, and the arm's cookie, the
// number the kernel marks those roots with.
type Armed struct {
	Process lineage.Identity `json:"process"`
	Session string           `json:"session"`
	Cookie  uint32           `json:"cookie"`
}
