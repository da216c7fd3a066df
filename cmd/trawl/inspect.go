package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	wide := fs.Bool("wide", false, "print every cell whole, however wide the terminal (the default cuts cells with … to fit it)")
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
	width := termWidth(stdout)
	if *wide || width == 0 {
		if err := paginate.WriteTable(stdout, ins); err != nil {
			return err
		}
		return paginate.WriteImportWarnings(stdout, r.Warnings)
	}
	// On a terminal: the table fits its width, the lines after it wrap.
	tb := &table{header: paginate.TableHeader, rows: paginate.TableRows(ins)}
	if err := tb.write(stdout, width); err != nil {
		return err
	}
	var rest strings.Builder
	for _, line := range paginate.TableSummary(ins) {
		rest.WriteString(line + "\n")
	}
	if err := paginate.WriteImportWarnings(&rest, r.Warnings); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSuffix(rest.String(), "\n"), "\n") {
		for _, l := range wrap(line, width, "    ") {
			if _, err := fmt.Fprintln(stdout, l); err != nil {
				return err
			}
		}
	}
	return nil
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
