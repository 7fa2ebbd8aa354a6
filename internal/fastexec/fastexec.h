//go:build cgo

// The fast path's fixed values, shared by fastexec.c and the Go side,
// which checks them against the Go definitions (fastexec_test.go).

#ifndef LINEAGE_FASTEXEC_H
#define LINEAGE_FASTEXEC_H

// The status `lineage exec` exits with when the command can't be run after
// its registration (exitstatus.CannotRun).
#define FASTEXEC_CANNOT_RUN 126

// The daemon's socket unless --socket or $LINEAGE_SOCKET names another
// (api.DefaultSocket, client.EnvSocket).
#define FASTEXEC_DEFAULT_SOCKET "/run/lineage/lineage.sock"
#define FASTEXEC_ENV_SOCKET "LINEAGE_SOCKET"

// The environment variables that ask for Go's own run: the profiles of
// cmd/lineage/profile.go.
#define FASTEXEC_ENV_CPUPROFILE "LINEAGE_CPUPROFILE"
#define FASTEXEC_ENV_BLOCKPROFILE "LINEAGE_BLOCKPROFILE"

#endif
