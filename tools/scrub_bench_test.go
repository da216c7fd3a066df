package tools

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchBody is about size bytes of a realistic JSON page: items with ids,
// names, e-mails, URLs and free text, none holding a secret.
func benchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"ord_%08d","customer":{"name":"Customer %d","email":"c%d@example.com"},"total":%d.%02d,"status":"open","url":"https://api.example.com/v1/orders/ord_%08d?expand=items","note":"Delivered to the front desk; signed by B. Smith (ref %x)."}`,
			i, i, i, i%977, i%100, i, i*7919)
	}
	b.WriteString(`],"has_more":false}`)
	return b.Bytes()
}

// benchSecrets is a deployment's worth of secrets: 12 organization
// credentials of mixed shapes and a model key.
func benchSecrets() []string {
	var out []string
	for i := range 12 {
		out = append(out, fmt.Sprintf("sk_live_%02d/Abc+def%016x", i, uint64(i)*0x9e3779b97f4a7c15))
	}
	return append(out, "sk-proj-Model0123456789abcdefABCDEF", "alice:pa55/word")
}

// BenchmarkScrubRatio scrubs a 24 MB body holding no secret (the common
// case) and one holding secrets, against a plain copy of the same bytes,
// interleaved in one run, in the thread's CPU time; it reports each as a
// ratio to the copy.
func BenchmarkScrubRatio(b *testing.B) {
	body := benchBody(24 << 20)
	dirty := bytes.Clone(body)
	secrets := benchSecrets()
	for i := 0; i < 200; i++ { // 200 echoed secrets spread over the body
		at := (len(dirty) / 201) * (i + 1)
		copy(dirty[at:], secrets[i%len(secrets)])
	}
	s := NewScrubber(secrets...).With("user-runtime-token-0123456789")
	dst := make([]byte, len(body))
	var tCopy, tClean, tDirty, tWriter time.Duration
	var sink bytes.Buffer
	sink.Grow(len(body) + 1<<20)
	b.SetBytes(int64(len(body)))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		t0 := threadCPU()
		copy(dst, body)
		t1 := threadCPU()
		if out := s.Bytes(body); len(out) != len(body) {
			b.Fatal("a clean body changed")
		}
		t2 := threadCPU()
		if out := s.Bytes(dirty); bytes.Contains(out, []byte(secrets[0])) {
			b.Fatal("a secret survived")
		}
		t3 := threadCPU()
		sink.Reset()
		w := s.Writer(&sink)
		for off := 0; off < len(body); off += chunkSize {
			w.Write(body[off:min(off+chunkSize, len(body))])
		}
		w.Close()
		t4 := threadCPU()
		tCopy += t1 - t0
		tClean += t2 - t1
		tDirty += t3 - t2
		tWriter += t4 - t3
	}
	n := float64(b.N)
	b.ReportMetric(float64(tCopy.Microseconds())/n, "copy-µs")
	b.ReportMetric(float64(tClean.Microseconds())/n, "clean-µs")
	b.ReportMetric(float64(tClean)/float64(tCopy), "clean/copy")
	b.ReportMetric(float64(tDirty)/float64(tCopy), "dirty/copy")
	b.ReportMetric(float64(tWriter)/float64(tCopy), "writer/copy")
	b.ReportMetric(float64(len(body))/tClean.Seconds()*n/1e9, "clean-GB/s")
}

// escapedBody is about size bytes of JSON whose strings are escaped
// throughout — every URL percent-encoded, every text \u-escaped — so that
// the decoded reading runs all the time: the scrubber's worst case for a
// body that holds no secret.
func escapedBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"ord_%08d","next":"https%%3A%%2F%%2Fapi.example.com%%2Fv1%%2Forders%%3Fcursor%%3D%08x%%26limit%%3D50","note":"\u0044\u0065livered \u0074o \u0074he \u0066ront \u0064esk\n\"signed\" by B. Smith \/ ref %x"}`,
			i, i*7919, i)
	}
	b.WriteString(`],"has_more":false}`)
	return b.Bytes()
}

// BenchmarkScrubEscaped is BenchmarkScrubRatio's clean case on a body
// escaped throughout (escapedBody), against a plain copy.
func BenchmarkScrubEscaped(b *testing.B) {
	body := escapedBody(24 << 20)
	s := NewScrubber(benchSecrets()...).With("user-runtime-token-0123456789")
	dst := make([]byte, len(body))
	var tCopy, tScrub time.Duration
	b.SetBytes(int64(len(body)))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		t0 := threadCPU()
		copy(dst, body)
		t1 := threadCPU()
		if out := s.Bytes(body); len(out) != len(body) {
			b.Fatal("an escaped body without secrets changed")
		}
		t2 := threadCPU()
		tCopy += t1 - t0
		tScrub += t2 - t1
	}
	b.ReportMetric(float64(tScrub)/float64(tCopy), "escaped/copy")
	b.ReportMetric(float64(len(body))/tScrub.Seconds()*float64(b.N)/1e9, "escaped-GB/s")
}

// BenchmarkNewScrubber is the cost of building a deployment's scrubber
// and of deriving a per-call one for a runtime credential.
func BenchmarkNewScrubber(b *testing.B) {
	secrets := benchSecrets()
	b.Run("deployment", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewScrubber(secrets...)
		}
	})
	base := NewScrubber(secrets...)
	b.Run("with runtime credential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			base.With("user-runtime-token-0123456789")
		}
	})
}
