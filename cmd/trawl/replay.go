package main

import (
	"context"
	"io"
)

// replay plays a recorded conversation against live tools (issue: the
// agent runtime). Until the runtime lands it refuses clearly.
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usagef("replay: not available yet")
}
