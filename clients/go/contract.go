package omstream

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:generate go run ./internal/syncschemas

// The published schemas (a copy of ../../schemas, kept in sync by `go generate`; a test compares them).
//
//go:embed schemas
var schemaFiles embed.FS

// ContractError is a payload that does not match the contract. Reason uses the worker's dead-letter reasons:
// invalid_json, unknown_schema, invalid_fields (or unknown_payload for a schema name that does not exist).
type ContractError struct {
	Reason   string
	Problems []string
}

func (e *ContractError) Error() string {
	return e.Reason + ": " + strings.Join(e.Problems, "; ")
}

type indexEntry struct {
	Name  string  `json:"name"`
	ID    string  `json:"id"`
	File  string  `json:"file"`
	Title string  `json:"title"`
	Tag   *string `json:"tag"`
}

type contract struct {
	entries  map[string]indexEntry
	names    []string
	raw      map[string]map[string]any // parsed schemas, for the normal form
	compiled map[string]*jsonschema.Schema
}

var (
	loaded     *contract
	loadedErr  error
	loadedOnce sync.Once
)

func theContract() (*contract, error) {
	loadedOnce.Do(func() { loaded, loadedErr = loadContract(schemaFiles) })
	return loaded, loadedErr
}

func loadContract(files fs.FS) (*contract, error) {
	data, err := fs.ReadFile(files, "schemas/index.json")
	if err != nil {
		return nil, err
	}
	var index struct {
		Schemas []indexEntry `json:"schemas"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, err
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat()
	c := &contract{entries: map[string]indexEntry{}, raw: map[string]map[string]any{},
		compiled: map[string]*jsonschema.Schema{}}
	for _, e := range index.Schemas {
		text, err := fs.ReadFile(files, "schemas/"+e.File)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.File, err)
		}
		if err := compiler.AddResource(e.ID, doc); err != nil {
			return nil, err
		}
		var parsed map[string]any
		if err := unmarshalNumbers(text, &parsed); err != nil {
			return nil, err
		}
		c.entries[e.Name], c.raw[e.Name] = e, parsed
		c.names = append(c.names, e.Name)
	}
	for _, name := range c.names {
		schema, err := compiler.Compile(c.entries[name].ID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.compiled[name] = schema
	}
	return c, nil
}

func unmarshalNumbers(data []byte, target any) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	if err := decoder.Decode(target); err != nil {
		return err
	}
	if decoder.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// SchemaNames lists every published schema ("om.message/v1", "data-om-status/v1", ...).
func SchemaNames() ([]string, error) {
	c, err := theContract()
	if err != nil {
		return nil, err
	}
	return append([]string(nil), c.names...), nil
}

// Validate checks raw JSON against the schema `name` (formats asserted, the record's schema tag checked) and
// returns the parsed value (numbers as json.Number).
func Validate(name string, raw []byte) (any, error) {
	c, err := theContract()
	if err != nil {
		return nil, err
	}
	entry, ok := c.entries[name]
	if !ok {
		return nil, &ContractError{"unknown_payload", []string{"no schema named " + name}}
	}
	var value any
	if err := unmarshalNumbers(raw, &value); err != nil {
		return nil, &ContractError{"invalid_json", []string{err.Error()}}
	}
	object, isObject := value.(map[string]any)
	if !isObject {
		return nil, &ContractError{"invalid_json", []string{"a payload is a JSON object"}}
	}
	if entry.Tag != nil && object["schema"] != *entry.Tag {
		return nil, &ContractError{"unknown_schema", []string{fmt.Sprintf("schema %v is not %s", object["schema"], *entry.Tag)}}
	}
	if err := c.compiled[name].Validate(value); err != nil {
		return nil, &ContractError{"invalid_fields", []string{err.Error()}}
	}
	return value, nil
}

// Decode validates raw against the schema `name`, then decodes it into target (a pointer to one of this
// package's payload types), refusing fields the type does not know.
func Decode(name string, raw []byte, target any) error {
	if _, err := Validate(name, raw); err != nil {
		return err
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(target); err != nil {
		return &ContractError{"invalid_fields", []string{err.Error()}}
	}
	return nil
}

// Normalize returns the normal form of a parsed payload: defaults written out, optional fields that are null left
// out, required fields kept even when null, created_at as om-stream writes it.
func Normalize(name string, value any) (any, error) {
	c, err := theContract()
	if err != nil {
		return nil, err
	}
	root, ok := c.raw[name]
	if !ok {
		return nil, &ContractError{"unknown_payload", []string{"no schema named " + name}}
	}
	return normalizeNode(root, root, value), nil
}

// EncodeCanonical is the RFC 8785 form of a typed payload's normal form: the bytes every client writes for it.
func EncodeCanonical(name string, payload any) ([]byte, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	var value any
	if err := unmarshalNumbers(data, &value); err != nil {
		return nil, err
	}
	normal, err := Normalize(name, value)
	if err != nil {
		return nil, err
	}
	return Canonicalize(normal)
}

// -- the normal form --------------------------------------------------------------------------------------------

func resolve(root, node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	var target any = root
	for _, step := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		target = target.(map[string]any)[step]
	}
	merged := map[string]any{}
	for k, v := range target.(map[string]any) {
		merged[k] = v
	}
	for k, v := range node {
		if k != "$ref" {
			merged[k] = v
		}
	}
	return merged
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func accepts(branch map[string]any, typ string) bool {
	declared, ok := branch["type"]
	if !ok {
		return true
	}
	var types []any
	if list, isList := declared.([]any); isList {
		types = list
	} else {
		types = []any{declared}
	}
	for _, t := range types {
		if t == typ || (typ == "integer" && t == "number") {
			return true
		}
	}
	return false
}

func branchFor(root map[string]any, branches []any, value any) map[string]any {
	var candidates []map[string]any
	for _, b := range branches {
		branch := resolve(root, b.(map[string]any))
		if accepts(branch, jsonType(value)) {
			candidates = append(candidates, branch)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	object, isObject := value.(map[string]any)
	if len(candidates) > 1 && isObject {
		for _, c := range candidates {
			props, _ := c["properties"].(map[string]any)
			for name, p := range props {
				if constant, has := p.(map[string]any)["const"]; has && object[name] == constant {
					return c
				}
			}
		}
	}
	return candidates[0]
}

var rfc3339 = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?$`)

// NormalDateTime writes a date-time as om-stream does: six fraction digits (none when zero), Z for UTC.
func NormalDateTime(text string) string {
	m := rfc3339.FindStringSubmatch(text)
	if m == nil {
		return text
	}
	fraction := m[3]
	if len(fraction) > 6 {
		fraction = fraction[:6]
	}
	fraction += strings.Repeat("0", 6-len(fraction))
	zone := m[4]
	if zone == "" || zone == "z" || zone == "Z" || zone == "+00:00" || zone == "-00:00" {
		zone = "Z"
	}
	if strings.Trim(fraction, "0") == "" {
		return m[1] + "T" + m[2] + zone
	}
	return m[1] + "T" + m[2] + "." + fraction + zone
}

func normalizeNode(root, node map[string]any, value any) any {
	schema := resolve(root, node)
	if value == nil {
		return nil
	}
	_, hasProperties := schema["properties"]
	union, isUnion := schema["anyOf"].([]any)
	if !isUnion {
		union, isUnion = schema["oneOf"].([]any)
	}
	if isUnion && !hasProperties {
		if branch := branchFor(root, union, value); branch != nil {
			return normalizeNode(root, branch, value)
		}
		return value
	}
	switch x := value.(type) {
	case []any:
		prefix, _ := schema["prefixItems"].([]any)
		items, _ := schema["items"].(map[string]any)
		out := make([]any, len(x))
		for i, item := range x {
			var itemSchema map[string]any
			if i < len(prefix) {
				itemSchema = prefix[i].(map[string]any)
			} else {
				itemSchema = items
			}
			if itemSchema == nil {
				out[i] = item
			} else {
				out[i] = normalizeNode(root, itemSchema, item)
			}
		}
		return out
	case map[string]any:
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			return x // free-form data (metadata, tool args): kept as sent
		}
		required := map[string]bool{}
		if list, ok := schema["required"].([]any); ok {
			for _, r := range list {
				required[r.(string)] = true
			}
		}
		out := map[string]any{}
		for name, item := range x {
			prop, known := props[name].(map[string]any)
			switch {
			case item == nil && known && !required[name]:
				// optional and null: left out
			case !known:
				out[name] = item
			default:
				out[name] = normalizeNode(root, prop, item)
			}
		}
		for name, p := range props {
			prop := p.(map[string]any)
			if fallback, has := prop["default"]; has && fallback != nil {
				if _, present := x[name]; !present {
					out[name] = normalizeNode(root, prop, deepCopy(fallback))
				}
			}
		}
		return out
	case string:
		if schema["format"] == "date-time" {
			return NormalDateTime(x)
		}
	}
	return value
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = deepCopy(item)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[k] = deepCopy(item)
		}
		return out
	}
	return v
}
