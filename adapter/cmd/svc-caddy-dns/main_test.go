package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// documentedProviders reads the first table of docs/adapter.md "DNS providers":
// module name -> the field names its row lists.
func documentedProviders(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/adapter.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## DNS providers\n")
	if !ok {
		t.Fatal(`docs/adapter.md has no "DNS providers" section`)
	}
	section, _, _ = strings.Cut(section, "\nLeft out")
	code := regexp.MustCompile("`([^`]+)`")
	field := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`") {
			continue
		}
		module := strings.Trim(strings.TrimSpace(cells[2]), "`")
		var fields []string
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			if field.MatchString(m[1]) {
				fields = append(fields, m[1])
			}
		}
		out[module] = fields
	}
	return out
}

// jsonFields lists a module's JSON keys, following embedded structs as
// encoding/json does.
func jsonFields(t reflect.Type, into map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			jsonFields(f.Type, into)
		case f.IsExported() && name != "":
			into[name] = true
		}
	}
}

// TestDocumentedProvidersAreCompiledIn: the providers compiled into
// svc-caddy-dns are exactly those docs/adapter.md lists, and every field the
// docs name is a JSON field of its module.
func TestDocumentedProvidersAreCompiledIn(t *testing.T) {
	documented := documentedProviders(t)
	var compiled []string
	for _, info := range caddy.GetModules("dns.providers") {
		compiled = append(compiled, info.ID.Name())
	}
	var listed []string
	for m := range documented {
		listed = append(listed, m)
	}
	slices.Sort(compiled)
	slices.Sort(listed)
	if !slices.Equal(compiled, listed) {
		t.Fatalf("compiled in: %v; documented: %v", compiled, listed)
	}
	for module, fields := range documented {
		info, err := caddy.GetModule("dns.providers." + module)
		if err != nil {
			t.Fatal(err)
		}
		known := map[string]bool{}
		jsonFields(reflect.TypeOf(info.New()), known)
		if len(fields) == 0 {
			t.Errorf("%s: the docs list no field", module)
		}
		for _, f := range fields {
			if !known[f] {
				t.Errorf("%s: the docs list %q, not a field of the module (fields: %v)", module, f, known)
			}
		}
	}
}
