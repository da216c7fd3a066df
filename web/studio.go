package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
)

// studioFiles is the Studio console: plain HTML, CSS and ES modules,
// served as they are — no build step, no third-party code, nothing
// fetched from another origin.
//
//go:embed studio
var studioFiles embed.FS

// studioCSP confines the console to its own origin: no inline script or
// style, no other origin for scripts, styles, images or API calls, no
// <base> rewriting, no form posts and no framing (the console holds the
// admin key, so it must not be embeddable). Pictures and sounds may also
// be data: URLs — those a tool returned, drawn in its card (they run no
// script).
const studioCSP = "default-src 'self'; img-src 'self' data:; media-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// studioTypes are the content types of the console's assets, by
// extension. A module script must be served as JavaScript, and with
// nosniff a wrong type is refused, so they are never left to guessing.
var studioTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// studioAsset is one embedded file, ready to serve.
type studioAsset struct {
	body  []byte
	ctype string
	etag  string
}

// studioAssets reads the embedded files once, by their path under
// studio/ ("index.html", "js/app.js").
var studioAssets = sync.OnceValue(func() map[string]studioAsset {
	root, err := fs.Sub(studioFiles, "studio")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	assets := map[string]studioAsset{}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		assets[p] = studioAsset{body: body, ctype: studioType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // reading an embed.FS cannot fail
	}
	return assets
})

// studioType is the content type served for an asset; the tests insist
// that every asset's extension is in studioTypes.
func studioType(name string) string {
	if t, ok := studioTypes[path.Ext(name)]; ok {
		return t
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// redirectStudio sends /studio to /studio/, where the console's relative
// asset and API paths resolve, and / to the console too (a 302: the root
// may serve something else one day).
func redirectStudio(c echo.Context) error {
	to := "/studio/"
	if q := c.Request().URL.RawQuery; q != "" {
		to += "?" + q
	}
	status := http.StatusMovedPermanently
	if c.Request().URL.Path == "/" {
		status = http.StatusFound
	}
	return c.Redirect(status, to)
}

// serveStudio serves the console's assets under /studio/ (index.html for
// the directory itself). The assets are public — the console asks for the
// admin key and keeps it in the tab's sessionStorage — so no auth here.
// Cache-Control: no-cache makes browsers revalidate on every load; the
// ETag turns that into a 304 while the binary is unchanged.
func serveStudio(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", studioCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	name := c.Param("*")
	if name == "" {
		name = "index.html"
	}
	a, ok := studioAssets()[name]
	if !ok || !fs.ValidPath(name) || strings.HasSuffix(name, "/") {
		return notFound("no Studio asset " + strconv.Quote(name))
	}
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	http.ServeContent(c.Response(), c.Request(), name, time.Time{}, bytes.NewReader(a.body))
	return nil
}

// deploymentInfo is GET /v1/info: what a console says about the
// deployment — above all whether the model is a replay, whose answers
// are recorded while the tool calls run live.
type deploymentInfo struct {
	// Store is where the deployment's state lives: "embedded" (one
	// process) or "redis" (replicas share it).
	Store string    `json:"store"`
	Demo  bool      `json:"demo"`
	Model modelInfo `json:"model"`
}

type modelInfo struct {
	// Provider is openai, replay, or "" when no model is configured (chat
	// answers 503).
	Provider string `json:"provider"`
	Name     string `json:"name,omitempty"`
	// Transcript names a replay model's recording.
	Transcript string `json:"transcript,omitempty"`
}

func (s *Server) info(c echo.Context) error {
	in := deploymentInfo{Demo: s.cfg.IsDemo(), Store: s.dep.StoreKind()}
	switch m := s.model.(type) {
	case nil:
	case *agent.Replay:
		in.Model = modelInfo{Provider: "replay", Transcript: m.Name()}
	default:
		in.Model = modelInfo{Provider: "openai", Name: s.cfg.Model.Name}
	}
	return c.JSON(http.StatusOK, in)
}
