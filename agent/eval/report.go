package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/agent"
)

// ReportVersion is the version of report.json's shape.
const ReportVersion = 1

// Files of a run's output folder.
const (
	ReportFile   = "report.json"
	JUnitFile    = "junit.xml"
	UpstreamFile = "upstream.jsonl"
)

// Report is a run: every case with its samples, and the totals.
type Report struct {
	Version     int           `json:"version"`
	Dataset     string        `json:"dataset"`
	Model       string        `json:"model"`
	Agent       string        `json:"agent,omitempty"`
	Upstream    string        `json:"upstream"`
	Repeat      int           `json:"repeat"`
	AllowWrites bool          `json:"allowWrites,omitempty"`
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished"`
	Cases       []*CaseResult `json:"cases"`
	Totals      Totals        `json:"totals"`
	// Comparison is set when the run was compared with a baseline.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// CaseResult is one case's samples (one per --repeat).
type CaseResult struct {
	ID    string   `json:"id"`
	Agent string   `json:"agent,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	// Passed: every sample passed every check.
	Passed   bool    `json:"passed"`
	PassRate float64 `json:"passRate"`
	// Failed names the checks that failed in any sample, each once.
	Failed  []string  `json:"failed,omitempty"`
	Samples []*Sample `json:"samples"`
}

// Sample is one run of a case.
type Sample struct {
	Passed           bool       `json:"passed"`
	Checks           []Check    `json:"checks"`
	Answer           string     `json:"answer"`
	ToolCalls        []ToolCall `json:"toolCalls"`
	Tokens           Tokens     `json:"tokens"`
	UpstreamRequests int        `json:"upstreamRequests"`
	LatencyMs        int64      `json:"latencyMs"`
	Agent            string     `json:"agent,omitempty"`
	Error            string     `json:"error,omitempty"`
	// Thread is the run's conversation (UIMessage[]).
	Thread []agent.UIMessage `json:"thread"`
}

// Tokens counts the model's tokens as it reported them.
type Tokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
	Total      int `json:"total"`
}

// Totals sum a report.
type Totals struct {
	Cases            int     `json:"cases"`
	Passed           int     `json:"passed"`
	Failed           int     `json:"failed"`
	Samples          int     `json:"samples"`
	SamplesPassed    int     `json:"samplesPassed"`
	PassRate         float64 `json:"passRate"` // of the samples
	ChecksFailed     int     `json:"checksFailed"`
	Tokens           Tokens  `json:"tokens"`
	UpstreamRequests int     `json:"upstreamRequests"`
	LatencyMs        int64   `json:"latencyMs"`
}

// total fills the cases' pass rates and the totals.
func (r *Report) total() {
	r.Totals = Totals{Cases: len(r.Cases)}
	for _, c := range r.Cases {
		passed := 0
		c.Failed = nil
		for _, s := range c.Samples {
			if s == nil {
				continue
			}
			r.Totals.Samples++
			if s.Passed {
				passed++
			}
			for _, ch := range s.Checks {
				if ch.Status == Fail {
					r.Totals.ChecksFailed++
					if !slices.Contains(c.Failed, ch.Name) {
						c.Failed = append(c.Failed, ch.Name)
					}
				}
			}
			r.Totals.Tokens.Prompt += s.Tokens.Prompt
			r.Totals.Tokens.Completion += s.Tokens.Completion
			r.Totals.Tokens.Total += s.Tokens.Total
			r.Totals.UpstreamRequests += s.UpstreamRequests
			r.Totals.LatencyMs += s.LatencyMs
		}
		r.Totals.SamplesPassed += passed
		if len(c.Samples) > 0 {
			c.PassRate = float64(passed) / float64(len(c.Samples))
		}
		c.Passed = passed == len(c.Samples)
		if c.Passed {
			r.Totals.Passed++
		} else {
			r.Totals.Failed++
		}
	}
	if r.Totals.Samples > 0 {
		r.Totals.PassRate = float64(r.Totals.SamplesPassed) / float64(r.Totals.Samples)
	}
}

// Exit statuses of a run.
const (
	ExitPass      = 0 // every check holds (and no regression against the baseline)
	ExitFail      = 1 // a check failed
	ExitRegressed = 3 // every check holds, but the comparison with the baseline regressed
)

// ExitCode is the run's exit status.
func (r *Report) ExitCode() int {
	switch {
	case r.Totals.Failed > 0:
		return ExitFail
	case r.Comparison != nil && r.Comparison.Regressed:
		return ExitRegressed
	}
	return ExitPass
}

// Write writes report.json and junit.xml into dir (made if needed).
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, JUnitFile))
	if err != nil {
		return err
	}
	if err := r.WriteJUnit(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadReport reads dir's report.json (dir may also name the file).
func ReadReport(dir string) (*Report, error) {
	path := dir
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		path = filepath.Join(dir, ReportFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("baseline %s: %v", path, err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("baseline %s: report version %d, want %d", path, r.Version, ReportVersion)
	}
	return &r, nil
}

// WriteTable writes the short summary a terminal shows: one line per
// case, the totals, and the comparison.
func (r *Report) WriteTable(w io.Writer) error {
	width := len("case")
	for _, c := range r.Cases {
		width = max(width, len(c.ID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-4s  %5s  %5s  %5s  %6s  %s\n", width, "case", "", "pass", "calls", "reqs", "tokens", "failed checks")
	for _, c := range r.Cases {
		mark := "✓"
		if !c.Passed {
			mark = "✗"
		}
		calls, reqs, tokens := 0, 0, 0
		for _, s := range c.Samples {
			calls += len(s.ToolCalls)
			reqs += s.UpstreamRequests
			tokens += s.Tokens.Total
		}
		n := max(len(c.Samples), 1)
		pass := fmt.Sprintf("%d/%d", int(c.PassRate*float64(len(c.Samples))+0.5), len(c.Samples))
		fmt.Fprintf(&b, "%-*s  %-4s  %5s  %5d  %5d  %6d  %s\n", width, c.ID, mark, pass, calls/n, reqs/n, tokens/n, orDash(c.Failed))
	}
	t := r.Totals
	fmt.Fprintf(&b, "%d cases: %d passed, %d failed", t.Cases, t.Passed, t.Failed)
	if r.Repeat > 1 {
		fmt.Fprintf(&b, " · %d runs each, pass rate %.0f%%", r.Repeat, 100*t.PassRate)
	}
	fmt.Fprintf(&b, " · %d upstream requests · %d tokens · model %s, upstream %s\n", t.UpstreamRequests, t.Tokens.Total, r.Model, r.Upstream)
	if c := r.Comparison; c != nil {
		b.WriteString(c.summary())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}
