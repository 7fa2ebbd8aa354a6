package client

import (
	"context"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// Holders asks which live members of root's lineage hold any of pipes,
// each a pipe's inode (fstat's st_ino on either end).
func (c *Client) Holders(ctx context.Context, root lineage.Identity, pipes ...uint64) (api.Holders, error) {
	var out api.Holders
	err := c.Do(ctx, "GET", HoldersPath(root, pipes...), nil, &out)
	return out, err
}

// HoldersPath is the path of GET /v1/roots/{root}/holders for pipes.
func HoldersPath(root lineage.Identity, pipes ...uint64) string {
	inodes := make([]string, len(pipes))
	for i, p := range pipes {
		inodes[i] = strconv.FormatUint(p, 10)
	}
	return "/v1/roots/" + root.String() + "/holders?pipe=" + strings.Join(inodes, ",")
}
