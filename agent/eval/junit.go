package eval

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The JUnit XML of a run, in the shape CI systems read (Jenkins, GitLab,
// GitHub's test reporters): one testsuite per run, one testcase per case,
// one failure per failed check (per sample, when --repeat ran it more
// than once), a skipped element for a case whose checks were all skipped
// or passed with some skipped, and the final answer as system-out.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"`
	Skipped   int             `xml:"skipped,attr"`
	Time      string          `xml:"time,attr"`
	Timestamp string          `xml:"timestamp,attr"`
	Props     *junitPropsList `xml:"properties,omitempty"`
	Cases     []junitCase     `xml:"testcase"`
}

type junitPropsList struct {
	Props []junitProp `xml:"property"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string         `xml:"name,attr"`
	Classname string         `xml:"classname,attr"`
	Time      string         `xml:"time,attr"`
	Skipped   *junitSkipped  `xml:"skipped,omitempty"`
	Failures  []junitFailure `xml:"failure"`
	SystemOut string         `xml:"system-out,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// WriteJUnit writes the run as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	name := "trawl eval " + r.Dataset
	suite := junitSuite{Name: r.Dataset, Tests: len(r.Cases), Time: seconds(r.Totals.LatencyMs), Timestamp: r.Started.Format("2006-01-02T15:04:05"),
		Props: &junitPropsList{Props: []junitProp{{"model", r.Model}, {"upstream", r.Upstream}, {"repeat", fmt.Sprint(r.Repeat)}}}}
	for _, c := range r.Cases {
		jc := junitCase{Name: c.ID, Classname: r.Dataset}
		var ms int64
		skips := 0
		for i, s := range c.Samples {
			if s == nil {
				continue
			}
			ms += s.LatencyMs
			prefix := ""
			if len(c.Samples) > 1 {
				prefix = fmt.Sprintf("run %d of %d: ", i+1, len(c.Samples))
			}
			for _, ch := range s.Checks {
				switch ch.Status {
				case Fail:
					jc.Failures = append(jc.Failures, junitFailure{Type: ch.Name, Message: prefix + ch.Name + ": " + oneLine(ch.Detail), Text: ch.Detail})
				case Skip:
					skips++
				}
			}
			if i == 0 {
				jc.SystemOut = s.Answer
			}
		}
		jc.Time = seconds(ms)
		if len(jc.Failures) > 0 {
			suite.Failures++
		} else if skips > 0 && !hasPassed(c) {
			jc.Skipped = &junitSkipped{Message: "every check was skipped"}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, jc)
	}
	out := junitSuites{Name: name, Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// hasPassed reports whether any check of c passed.
func hasPassed(c *CaseResult) bool {
	for _, s := range c.Samples {
		for _, ch := range s.Checks {
			if ch.Status == Pass {
				return true
			}
		}
	}
	return false
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:299]) + "…"
	}
	return s
}
