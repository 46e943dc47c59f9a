package omstream

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The Go types are checked against the published schemas: every property is a field with its wire name and no
// field is unknown to the schema; a required field is never omitted when empty; an optional one always may be.

type goField struct {
	typ       reflect.Type
	omitempty bool
}

func structFields(typ reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue // never on the wire (JSON skips it)
		}
		if f.Anonymous {
			for name, inner := range structFields(f.Type) {
				out[name] = inner
			}
			continue
		}
		name, options, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = goField{f.Type, strings.Contains(options, "omitempty")}
	}
	return out
}

// objectShape is the properties and the required names of an object schema, or of a union of object schemas
// (every variant's properties; required = required in all of them).
func objectShape(root, node map[string]any) (map[string]map[string]any, map[string]bool, bool) {
	schema := resolve(root, node)
	if props, ok := schema["properties"].(map[string]any); ok {
		out := map[string]map[string]any{}
		for name, p := range props {
			out[name] = p.(map[string]any)
		}
		required := map[string]bool{}
		if list, ok := schema["required"].([]any); ok {
			for _, r := range list {
				required[r.(string)] = true
			}
		}
		return out, required, true
	}
	branches, isUnion := schema["oneOf"].([]any)
	if !isUnion {
		branches, isUnion = schema["anyOf"].([]any)
	}
	if !isUnion {
		return nil, nil, false
	}
	props, required, found := map[string]map[string]any{}, map[string]bool(nil), false
	for _, b := range branches {
		p, r, ok := objectShape(root, b.(map[string]any))
		if !ok {
			continue
		}
		for name, s := range p {
			props[name] = s
		}
		if required == nil {
			required = r
		} else {
			for name := range required {
				if !r[name] {
					delete(required, name)
				}
			}
		}
		found = true
	}
	return props, required, found
}

func elementSchema(root, node map[string]any) map[string]any {
	schema := resolve(root, node)
	if items, ok := schema["items"].(map[string]any); ok {
		return items
	}
	if branches, ok := schema["anyOf"].([]any); ok {
		for _, b := range branches {
			if items, ok := resolve(root, b.(map[string]any))["items"].(map[string]any); ok {
				return items
			}
		}
	}
	return nil
}

func checkType(t *testing.T, path string, root, node map[string]any, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8 {
		if items := elementSchema(root, node); items != nil {
			checkType(t, path+"[]", root, items, typ.Elem())
		}
		return
	}
	if typ.Kind() != reflect.Struct {
		return
	}
	props, required, ok := objectShape(root, node)
	if !ok {
		t.Errorf("%s: %s is a struct but the schema is not an object", path, typ)
		return
	}
	fields := structFields(typ)
	var missing, extra []string
	for name := range props {
		if _, ok := fields[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range fields {
		if _, ok := props[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s (%s): fields missing %v, not in the schema %v", path, typ, missing, extra)
	}
	for name, prop := range props {
		f, ok := fields[name]
		if !ok {
			continue
		}
		if required[name] && f.omitempty {
			t.Errorf("%s.%s is required but omitted when empty", path, name)
		}
		if !required[name] && !f.omitempty {
			t.Errorf("%s.%s is optional but never omitted", path, name)
		}
		checkType(t, path+"."+name, root, prop, f.typ)
	}
}

func TestTypesMatchTheSchemas(t *testing.T) {
	c, err := theContract()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range c.names {
		newValue, ok := PayloadTypes[name]
		if !ok {
			t.Errorf("no Go type for %s", name)
			continue
		}
		checkType(t, name, c.raw[name], c.raw[name], reflect.TypeOf(newValue()))
	}
	if len(PayloadTypes) != len(c.names) {
		t.Errorf("%d Go payload types for %d schemas", len(PayloadTypes), len(c.names))
	}
}

func TestTheEmbeddedSchemasAreThePublishedOnes(t *testing.T) {
	c, err := theContract()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"index.json"}
	for _, name := range c.names {
		files = append(files, c.entries[name].File)
	}
	for _, file := range files {
		published, err := os.ReadFile(filepath.Join("..", "..", "schemas", file))
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := schemaFiles.ReadFile("schemas/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(published, embedded) {
			t.Errorf("%s differs from ../../schemas: run `go generate ./...`", file)
		}
	}
}
