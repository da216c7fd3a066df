package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/trawl-dev/trawl/web/deploy"
)

// listTools prints the deployment's tools: a table, or with --json the
// array GET /v1/tools answers.
func listTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("tools", stderr)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON array, each tool as GET /v1/tools shows it")
	wide := fs.Bool("wide", false, "print every cell whole, however wide the terminal (the default cuts cells with … to fit it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("tools: unexpected argument %q", fs.Arg(0))
	}
	srv, done, err := openParts(ctx, *cfgPath, stderr, deploy.PartsCall)
	if err != nil {
		return err
	}
	defer done()
	views := srv.ToolViews()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(views)
	}
	tb := &table{header: []string{"TOOL", "KIND", "EFFECT", "METHOD", "PATH", "PAGINATION", "ITEMS"}}
	paginated, writes := 0, 0
	for _, v := range views {
		items := "-"
		if v.Pagination.ItemsFound {
			items = v.Pagination.Items
			if items == "" {
				items = "(bare array)"
			}
		}
		if v.Pagination.Paginated() {
			paginated++
		}
		if v.Effect.Writes() {
			writes++
		}
		method, path := v.Method, v.Path
		if method == "" {
			method, path = "-", "-"
		}
		tb.rows = append(tb.rows, []string{v.ID, string(v.Kind), string(v.Effect), method, path, string(v.Pagination.Strategy), items})
	}
	width := termWidth(stdout)
	if *wide {
		width = 0
	}
	if err := tb.write(stdout, width); err != nil {
		return err
	}
	for _, line := range wrap(fmt.Sprintf("%d tools, %d with detected pagination, %d that change data", len(views), paginated, writes), width, "  ") {
		if _, err := fmt.Fprintln(stdout, line); err != nil {
			return err
		}
	}
	return nil
}
