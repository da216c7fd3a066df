package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"strings"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// inspect imports an OpenAPI document and prints the tools it yields with
// the pagination detected for each, and what the import repaired or
// skipped. --json prints {"tools": [...], "importWarnings": [...]}.
func inspect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print one JSON array")
	// Accept the spec before or after the flags.
	var spec string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		spec, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if spec == "" && fs.NArg() > 0 {
		spec = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usagef("inspect: unexpected argument %q", fs.Arg(0))
	}
	if spec == "" {
		return usagef("inspect: usage: trawl inspect SPEC [--json]")
	}
	provider := strings.TrimSuffix(filepath.Base(spec), filepath.Ext(spec))
	provider = sanitizeID(provider)
	r, err := tools.ImportOpenAPIReport(ctx, spec, tools.ImportOptions{ProviderID: provider})
	if err != nil {
		return err
	}
	ins := paginate.Inspect(r.Tools)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		warnings := r.Warnings
		if warnings == nil {
			warnings = []tools.ImportWarning{}
		}
		return enc.Encode(map[string]any{"tools": ins, "importWarnings": warnings})
	}
	if err := paginate.WriteTable(stdout, ins); err != nil {
		return err
	}
	return paginate.WriteImportWarnings(stdout, r.Warnings)
}

// sanitizeID makes a provider id from a file name.
func sanitizeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "spec"
	}
	return b.String()
}
