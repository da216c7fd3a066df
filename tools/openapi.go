package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

// ImportOptions configures an OpenAPI import.
type ImportOptions struct {
	// ProviderID names the provider the tools belong to; required, and a
	// valid name (letters, digits, '_' and '-'). A tool's ID is
	// ProviderID + "." + its Name.
	ProviderID string
	// BaseURL is the origin every tool's path is joined to (a trailing
	// slash is dropped, as from the document's servers). Zero: the
	// servers the document declares (an operation's own servers first,
	// then its path's, then the document's first server, with server
	// variables set to their defaults); for Swagger 2.0, scheme://host
	// plus basePath, https when the document lists it.
	BaseURL string
}

// ErrNotOpenAPI is returned for a document that is neither OpenAPI 3.x
// nor Swagger 2.0.
var ErrNotOpenAPI = errors.New("not an OpenAPI 3.x or Swagger 2.0 document")

// maxToolDescription caps a tool's description, cut at a sentence or word.
const maxToolDescription = 1000

// ImportOpenAPI reads the OpenAPI 3.0/3.1 or Swagger 2.0 document (JSON or
// YAML) at path and returns one tool per operation, sorted by path and
// method. Relative $refs to other files resolve against path; only local
// files are read, never URLs (a $ref to a URL or to a missing file is
// handled as a dangling one, below). Errors name the file and what failed.
//
// Each tool carries the operation's path, query and header parameters
// (path-level ones merged in; cookies and credentials left out, since the
// invoker injects those), its request body flattened into InBody
// parameters, the JSON schema of its success response and its x-
// extensions, which pagination detection reads.
//
// kin-openapi reads OpenAPI 3.1 itself (type lists, const, examples,
// $defs, webhooks, $ref siblings); the schema conversion maps a type list
// to its non-null type plus Nullable and const to a one-value Enum.
// Swagger 2.0 is converted with openapi2conv. The one construct
// kin-openapi rejects that vendor documents use — "items" holding a list
// of alternative schemas, as in Slack's — is rewritten to anyOf before
// loading (see normalizeDocument).
//
// Import is lenient (see ImportOpenAPIReport, which also returns what was
// repaired and skipped): a document is refused only when no operation in
// it is usable.
func ImportOpenAPI(ctx context.Context, path string, opt ImportOptions) ([]*Tool, error) {
	r, err := ImportOpenAPIReport(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	return r.Tools, nil
}

// ImportOpenAPIReport is ImportOpenAPI, returning with the tools every
// repair and skip the import made. The document is loaded strictly
// first; when kin-openapi refuses it, what has exactly one repair is
// repaired (a $ref to the wrong kind of component whose target holds a
// usable schema, a dangling schema $ref, a response without its
// description, status codes written as integers or "2xx") and what
// cannot be repaired is skipped per operation. An operation that does
// not make a valid tool is skipped too.
func ImportOpenAPIReport(ctx context.Context, path string, opt ImportOptions) (*ImportReport, error) {
	if err := opt.check(); err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("importing OpenAPI document: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	out, err := importDocument(ctx, data, &url.URL{Path: filepath.ToSlash(abs)}, opt)
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", path, err)
	}
	return out, nil
}

// ImportOpenAPIData is ImportOpenAPI for one self-contained document held
// in memory: a $ref to another file cannot be followed and is handled as
// a dangling one (repaired or its operation skipped, and reported).
func ImportOpenAPIData(data []byte, opt ImportOptions) ([]*Tool, error) {
	r, err := ImportOpenAPIDataReport(data, opt)
	if err != nil {
		return nil, err
	}
	return r.Tools, nil
}

// ImportOpenAPIDataReport is ImportOpenAPIReport for a document held in
// memory.
func ImportOpenAPIDataReport(data []byte, opt ImportOptions) (*ImportReport, error) {
	if err := opt.check(); err != nil {
		return nil, fmt.Errorf("importing OpenAPI document: %w", err)
	}
	out, err := importDocument(context.Background(), data, nil, opt)
	if err != nil {
		return nil, fmt.Errorf("importing OpenAPI document: %w", err)
	}
	return out, nil
}

func (opt ImportOptions) check() error {
	if !ValidName(opt.ProviderID) {
		return fmt.Errorf("provider id %q must be 1-64 letters, digits, '_' or '-'", opt.ProviderID)
	}
	return nil
}

func importDocument(ctx context.Context, data []byte, location *url.URL, opt ImportOptions) (*ImportReport, error) {
	log := &repairLog{}
	doc, base, err := loadDocument(ctx, data, location, log)
	if err != nil {
		return nil, err
	}
	im := &importer{
		opt:     opt,
		doc:     doc,
		base:    base,
		auth:    authParams(doc),
		schemas: newSchemaConverter(),
		log:     log,
	}
	ts, err := im.tools(ctx)
	if err != nil {
		return nil, err
	}
	return &ImportReport{Tools: ts, Warnings: log.list}, nil
}

// loadDocument parses and resolves the document, converting Swagger 2.0 to
// OpenAPI 3, and returns it with its default base URL.
//
// A document the strict loader refuses is loaded leniently (loadLenient),
// its repairs and skips logged.
func loadDocument(ctx context.Context, data []byte, location *url.URL, log *repairLog) (*openapi3.T, string, error) {
	swagger, version, err := sniffVersion(data)
	if err != nil {
		return nil, "", err
	}
	if swagger {
		return loadSwagger(ctx, data, location)
	}
	if !strings.HasPrefix(version, "3.") {
		return nil, "", fmt.Errorf("%w: openapi version %q", ErrNotOpenAPI, version)
	}
	doc, err := loadV3(ctx, data, location)
	if err != nil {
		// A document kin-openapi rejects may use a construct seen in the
		// wild that normalizeDocument rewrites; try once more with it.
		if fixed, ok := normalizeDocument(data, false); ok {
			data = fixed
			doc, err = loadV3(ctx, fixed, location)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if doc, err = loadLenient(ctx, data, location, err, log); err != nil {
			if strings.HasPrefix(err.Error(), "loading document") || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("loading document: %w", err)
		}
	}
	return doc, serverURL(doc.Servers), nil
}

func newLoader(ctx context.Context, location *url.URL) *openapi3.Loader {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	if location != nil {
		loader.IsExternalRefsAllowed = true
		loader.ReadFromURIFunc = readLocalFile
	}
	return loader
}

// readLocalFile reads a file a $ref names; URLs are refused, so importing
// a document never reaches the network.
func readLocalFile(loader *openapi3.Loader, u *url.URL) ([]byte, error) {
	if u.Host != "" || (u.Scheme != "" && u.Scheme != "file") {
		return nil, fmt.Errorf("reference %s: only local files are followed", u.Redacted())
	}
	if err := loader.Context.Err(); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Clean(filepath.FromSlash(u.Path)))
}

func loadV3(ctx context.Context, data []byte, location *url.URL) (*openapi3.T, error) {
	loader := newLoader(ctx, location)
	if location == nil {
		return loader.LoadFromData(data)
	}
	return loader.LoadFromDataWithPath(data, location)
}

func loadSwagger(ctx context.Context, data []byte, location *url.URL) (*openapi3.T, string, error) {
	var doc2 openapi2.T
	if err := openapi2.UnmarshalFromData(data, &doc2); err != nil {
		fixed, ok := normalizeDocument(data, true)
		if !ok {
			return nil, "", fmt.Errorf("loading Swagger 2.0 document: %w", err)
		}
		doc2 = openapi2.T{}
		if err2 := openapi2.UnmarshalFromData(fixed, &doc2); err2 != nil {
			return nil, "", fmt.Errorf("loading Swagger 2.0 document: %w", err)
		}
	}
	doc, err := openapi2conv.ToV3WithLoader(&doc2, newLoader(ctx, location), location)
	if err != nil {
		return nil, "", fmt.Errorf("converting Swagger 2.0 document: %w", err)
	}
	return doc, swaggerURL(&doc2), nil
}

var yamlVersion = regexp.MustCompile(`^["']?(swagger|openapi)["']?[ \t]*:[ \t]*["']?([0-9][0-9A-Za-z.\-]*)`)

// findVersionLine matches yamlVersion on the first line that starts with
// a version key. Running the expression over the whole document would
// take tens of milliseconds on a large one whose key comes last (Stripe
// sorts it after components).
func findVersionLine(data []byte) [][]byte {
	for _, key := range []string{"openapi", "swagger"} {
		for at := 0; ; {
			i := bytes.Index(data[at:], []byte(key))
			if i < 0 {
				break
			}
			start := at + i
			at = start + len(key)
			if start > 0 && (data[start-1] == '"' || data[start-1] == '\'') {
				start--
			}
			if start > 0 && data[start-1] != '\n' {
				continue
			}
			end := bytes.IndexByte(data[start:], '\n')
			if end < 0 {
				end = len(data) - start
			}
			if m := yamlVersion.FindSubmatch(data[start : start+end]); m != nil {
				return m
			}
		}
	}
	return nil
}

// sniffVersion finds the document's top-level swagger or openapi key
// without parsing the whole document twice.
func sniffVersion(data []byte) (swagger bool, version string, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return false, "", fmt.Errorf("%w: the document is empty", ErrNotOpenAPI)
	}
	if trimmed[0] == '{' {
		var head struct {
			Swagger any `json:"swagger"`
			OpenAPI any `json:"openapi"`
		}
		if err := json.Unmarshal(trimmed, &head); err != nil {
			return false, "", fmt.Errorf("parsing JSON: %w", err)
		}
		switch {
		case head.OpenAPI != nil:
			return false, fmt.Sprint(head.OpenAPI), nil
		case head.Swagger != nil:
			return versionIs2(fmt.Sprint(head.Swagger))
		}
		return false, "", fmt.Errorf("%w: no openapi or swagger key", ErrNotOpenAPI)
	}
	m := findVersionLine(data)
	if m == nil {
		return false, "", fmt.Errorf("%w: no top-level openapi or swagger key", ErrNotOpenAPI)
	}
	if string(m[1]) == "swagger" {
		return versionIs2(string(m[2]))
	}
	return false, string(m[2]), nil
}

func versionIs2(v string) (bool, string, error) {
	if v != "2.0" && v != "2" {
		return false, "", fmt.Errorf("%w: swagger version %q", ErrNotOpenAPI, v)
	}
	return true, "2.0", nil
}

// serverURL is the first server's URL with its variables' defaults
// substituted, without a trailing slash.
func serverURL(servers openapi3.Servers) string {
	if len(servers) == 0 || servers[0] == nil {
		return ""
	}
	s := servers[0]
	u := s.URL
	for name, v := range s.Variables {
		if v != nil {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
	}
	return strings.TrimRight(u, "/")
}

// swaggerURL is scheme://host/basePath of a Swagger 2.0 document.
func swaggerURL(doc *openapi2.T) string {
	if doc.Host == "" {
		return strings.TrimRight(doc.BasePath, "/")
	}
	scheme := "https"
	if len(doc.Schemes) > 0 && !slices.Contains(doc.Schemes, "https") {
		scheme = doc.Schemes[0]
	}
	return strings.TrimRight(scheme+"://"+doc.Host+doc.BasePath, "/")
}

// importer maps one loaded document's operations to tools.
type importer struct {
	opt     ImportOptions
	doc     *openapi3.T
	base    string
	auth    map[paramKey]bool // parameters that carry credentials
	schemas *schemaConverter
	log     *repairLog
}

type paramKey struct{ in, name string }

// operation is one operation on its way to a tool.
type operation struct {
	method, path string
	item         *openapi3.PathItem
	op           *openapi3.Operation
	name         string // sanitised base name, before uniqueness
	exact        bool   // name is the operationId unchanged
}

func (im *importer) tools(ctx context.Context) ([]*Tool, error) {
	ops := im.operations()
	assignNames(ops)
	out := make([]*Tool, 0, len(ops))
	var first error
	for _, o := range ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := im.tool(o)
		if err != nil {
			// One operation that makes no valid tool costs that tool only.
			im.log.skipped(o.method+" "+o.path, strings.TrimPrefix(err.Error(), o.method+" "+o.path+": "))
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 && first != nil {
		return nil, fmt.Errorf("%w: %v", errNothingUsable, first)
	}
	return out, nil
}

// methodOrder lists methods in the order tools of one path are returned.
var methodOrder = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE", "QUERY", "CONNECT"}

func (im *importer) operations() []*operation {
	if im.doc.Paths == nil {
		return nil
	}
	paths := im.doc.Paths.Keys()
	slices.Sort(paths)
	var ops []*operation
	for _, path := range paths {
		item := im.doc.Paths.Value(path)
		if item == nil {
			continue
		}
		byMethod := item.Operations()
		methods := make([]string, 0, len(byMethod))
		for m := range byMethod {
			methods = append(methods, m)
		}
		slices.SortFunc(methods, func(a, b string) int {
			ia, ib := rank(a), rank(b)
			if ia != ib {
				return ia - ib
			}
			return strings.Compare(a, b)
		})
		for _, m := range methods {
			op := byMethod[m]
			if op == nil {
				continue
			}
			o := &operation{method: strings.ToUpper(m), path: path, item: item, op: op}
			o.name, o.exact = baseName(o.method, path, op.OperationID)
			ops = append(ops, o)
		}
	}
	return ops
}

func rank(method string) int {
	if i := slices.Index(methodOrder, strings.ToUpper(method)); i >= 0 {
		return i
	}
	return len(methodOrder)
}

func (im *importer) tool(o *operation) (*Tool, error) {
	origin := strings.TrimRight(im.opt.BaseURL, "/")
	if origin == "" {
		origin = im.base
		if o.op.Servers != nil && len(*o.op.Servers) > 0 {
			origin = serverURL(*o.op.Servers)
		} else if len(o.item.Servers) > 0 {
			origin = serverURL(o.item.Servers)
		}
	}
	t := &Tool{
		ID:              im.opt.ProviderID + "." + o.name,
		Provider:        im.opt.ProviderID,
		Name:            o.name,
		Description:     describeOperation(o.op.Summary, o.op.Description),
		Kind:            KindAPI,
		Method:          o.method,
		Path:            o.path,
		Origin:          origin,
		OperationID:     o.op.OperationID,
		Response:        im.response(o.op),
		ResponseHeaders: responseHeaders(o.op),
		Extensions:      extensions(o.op.Extensions),
	}
	t.Params, t.ContentType, t.OpenArgs = im.params(o)
	t.Effect, t.EffectDeclared = importEffect(t, o.op.Summary)
	if t.Description == "" {
		t.Description = o.method + " " + o.path
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", o.method, o.path, err)
	}
	return t, nil
}

// params merges path-level and operation-level parameters (the
// operation's win), leaves out cookies and credentials, and flattens the
// request body, whose media type it returns too, and where arguments it
// does not declare go (InBody when the body admits more properties).
func (im *importer) params(o *operation) ([]Param, string, Location) {
	var list []*openapi3.Parameter
	index := map[paramKey]int{}
	for _, group := range []openapi3.Parameters{o.item.Parameters, o.op.Parameters} {
		for _, ref := range group {
			if ref == nil || ref.Value == nil {
				continue
			}
			p := ref.Value
			k := paramKey{p.In, p.Name}
			if i, ok := index[k]; ok {
				list[i] = p
				continue
			}
			index[k] = len(list)
			list = append(list, p)
		}
	}
	var out []Param
	names := map[string]bool{}
	var rb *openapi3.RequestBody
	if o.op.RequestBody != nil && o.op.RequestBody.Value != nil {
		rb = o.op.RequestBody.Value
		// The invoker reads an argument named "body" with no Wire as the
		// whole body; keep the name free for it.
		names[wholeBody] = true
	}
	for _, p := range list {
		if im.skipParam(p) {
			continue
		}
		name := uniqueName(names, paramName(p.Name), p.In)
		out = append(out, Param{
			Name:        name,
			Wire:        wireName(name, p.Name),
			In:          Location(p.In),
			Required:    p.Required || p.In == openapi3.ParameterInPath,
			Description: im.schemas.describe(p.Description),
			Schema:      im.schemas.convert(paramSchema(p), modeRequest),
		})
	}
	if rb == nil {
		return out, "", ""
	}
	return im.body(out, names, rb)
}

// skipParam leaves out what the model must not supply: cookies, the
// headers OpenAPI says to ignore (Accept, Content-Type, Authorization),
// and parameters carrying credentials, which the invoker injects.
func (im *importer) skipParam(p *openapi3.Parameter) bool {
	switch p.In {
	case openapi3.ParameterInPath, openapi3.ParameterInQuery, openapi3.ParameterInHeader:
	default:
		return true
	}
	if im.auth[paramKey{p.In, strings.ToLower(p.Name)}] {
		return true
	}
	lower := strings.ToLower(p.Name)
	if p.In == openapi3.ParameterInHeader {
		switch lower {
		case "accept", "content-type", "authorization", "proxy-authorization", "cookie":
			return true
		}
	}
	return p.In != openapi3.ParameterInPath && credentialNames[lower]
}

// credentialNames are header and query parameter names that carry a
// credential by convention (Slack's token, GitHub's access_token).
var credentialNames = map[string]bool{
	"token": true, "access_token": true, "api_key": true, "apikey": true, "api-key": true,
	"x-api-key": true, "x-auth-token": true, "x-access-token": true,
}

// authParams collects the parameters the document's apiKey security
// schemes name.
func authParams(doc *openapi3.T) map[paramKey]bool {
	out := map[paramKey]bool{}
	if doc.Components == nil {
		return out
	}
	for _, ref := range doc.Components.SecuritySchemes {
		if ref == nil || ref.Value == nil || ref.Value.Type != "apiKey" {
			continue
		}
		out[paramKey{ref.Value.In, strings.ToLower(ref.Value.Name)}] = true
	}
	return out
}

func paramSchema(p *openapi3.Parameter) *openapi3.SchemaRef {
	if p.Schema != nil {
		return p.Schema
	}
	for _, mt := range sortedMedia(p.Content) {
		if mt.media.Schema != nil {
			return mt.media.Schema
		}
	}
	return nil
}

// wholeBody names the argument that stands for the whole request body
// (Param.Wire empty); a flattened property of that name keeps Wire set.
const wholeBody = "body"

// body flattens a request body into params: each top-level property of an
// object body becomes a Param with In == InBody; a body that is not an
// object, has no properties, or whose property names collide with other
// parameters is one Param for the whole body. It also returns the body's
// media type, and InBody when the flattened body admits properties it
// does not list (additionalProperties true or a schema).
func (im *importer) body(params []Param, names map[string]bool, rb *openapi3.RequestBody) ([]Param, string, Location) {
	mediaType, media := pickMedia(rb.Content, true)
	if media == nil {
		return params, "", ""
	}
	s := im.schemas.convert(media.Schema, modeRequest)
	if s != nil && s.Type == "object" && len(s.Properties) == 0 && closedObject(media.Schema) {
		return params, "", "" // an empty body, as Stripe declares on every GET
	}
	if s != nil && s.Type == "object" && len(s.Properties) > 0 {
		props := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			props = append(props, name)
		}
		slices.Sort(props)
		flat := make([]Param, 0, len(props))
		taken := map[string]bool{}
		ok := true
		for _, prop := range props {
			name := paramName(prop)
			if (names[name] && name != wholeBody) || taken[name] {
				ok = false
				break
			}
			taken[name] = true
			ps := s.Properties[prop]
			desc := ""
			if ps != nil {
				desc = ps.Description
			}
			wire := wireName(name, prop)
			if name == wholeBody {
				wire = prop // a property named "body", not the whole body
			}
			flat = append(flat, Param{
				Name:        name,
				Wire:        wire,
				In:          InBody,
				Required:    slices.Contains(s.Required, prop),
				Description: desc,
				Schema:      ps,
			})
		}
		if ok {
			var open Location
			if s.AdditionalProperties {
				open = InBody
			}
			return append(params, flat...), mediaType, open
		}
	}
	return append(params, Param{
		Name:        wholeBody,
		In:          InBody,
		Required:    rb.Required,
		Description: im.schemas.describe(rb.Description),
		Schema:      s,
	}), mediaType, ""
}

// closedObject reports a schema that admits no properties beyond those
// it lists (additionalProperties: false).
func closedObject(ref *openapi3.SchemaRef) bool {
	if ref == nil || ref.Value == nil {
		return false
	}
	has := ref.Value.AdditionalProperties.Has
	return has != nil && !*has
}

// success is the success response: 200, then 201, then the first other
// 2XX, then default.
func success(op *openapi3.Operation) *openapi3.Response {
	if op.Responses == nil {
		return nil
	}
	codes := op.Responses.Keys()
	slices.Sort(codes)
	order := []string{"200", "201"}
	for _, c := range codes {
		if strings.HasPrefix(c, "2") && c != "200" && c != "201" {
			order = append(order, c)
		}
	}
	order = append(order, "default")
	for _, c := range order {
		if ref := op.Responses.Value(c); ref != nil && ref.Value != nil {
			return ref.Value
		}
	}
	return nil
}

// response is the JSON body schema of the success response.
func (im *importer) response(op *openapi3.Operation) *Schema {
	r := success(op)
	if r == nil {
		return nil
	}
	if _, media := pickMedia(r.Content, false); media != nil {
		return im.schemas.convert(media.Schema, modeResponse)
	}
	return nil
}

// responseHeaders are the header names the success response declares
// (GitHub declares Link there), sorted.
func responseHeaders(op *openapi3.Operation) []string {
	r := success(op)
	if r == nil || len(r.Headers) == 0 {
		return nil
	}
	out := make([]string, 0, len(r.Headers))
	for name := range r.Headers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

type namedMedia struct {
	name  string
	media *openapi3.MediaType
}

func sortedMedia(content openapi3.Content) []namedMedia {
	out := make([]namedMedia, 0, len(content))
	for name, mt := range content {
		if mt != nil {
			out = append(out, namedMedia{name, mt})
		}
	}
	slices.SortFunc(out, func(a, b namedMedia) int { return strings.Compare(a.name, b.name) })
	return out
}

// pickMedia chooses the media type to read a schema from and returns it
// (without parameters) with its entry: JSON first; for request bodies then
// form-urlencoded and multipart (Swagger formData arrives as these), then
// any other; for responses JSON-like or */* only. A wildcard is reported
// as application/json.
func pickMedia(content openapi3.Content, request bool) (string, *openapi3.MediaType) {
	bestName, bestRank := "", -1
	var best *openapi3.MediaType
	for _, m := range sortedMedia(content) {
		name, _, _ := strings.Cut(strings.ToLower(m.name), ";")
		name = strings.TrimSpace(name)
		r := mediaRank(name, request)
		if r >= 0 && (best == nil || r < bestRank) {
			bestName, best, bestRank = name, m.media, r
		}
	}
	if bestName == "*/*" || bestName == "application/*" {
		bestName = "application/json"
	}
	return bestName, best
}

func mediaRank(name string, request bool) int {
	switch {
	case name == "application/json":
		return 0
	case strings.HasSuffix(name, "+json") || strings.Contains(name, "json"):
		return 1
	case name == "*/*" || name == "application/*":
		return 2
	case request && name == "application/x-www-form-urlencoded":
		return 3
	case request && name == "multipart/form-data":
		return 4
	case request:
		return 5
	}
	return -1
}
