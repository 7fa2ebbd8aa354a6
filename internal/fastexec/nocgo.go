//go:build !cgo

package fastexec

// Linked says this binary has the fast path: built without cgo, it has none.
const Linked = false
