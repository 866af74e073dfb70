package main

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func openFixture(t *testing.T) *GeoIP {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fixture.mmdb")
	if err := os.WriteFile(path, geoipFixture(t), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGeoIP(path)
	if err != nil || g == nil {
		t.Fatalf("OpenGeoIP: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

func decodeCf(t *testing.T, text []byte) map[string]any {
	t.Helper()
	var cf map[string]any
	if err := json.Unmarshal(text, &cf); err != nil {
		t.Fatalf("not JSON: %s", text)
	}
	return cf
}

func TestGeoIPLookupGivesCloudflaresFields(t *testing.T) {
	g := openFixture(t)
	cases := map[string]map[string]any{
		"81.2.69.160": {
			"country": "GB", "continent": "EU", "city": "London", "postalCode": "EC4R",
			"latitude": "51.51420", "longitude": "-0.09310", "timezone": "Europe/London",
			"region": "England", "regionCode": "ENG",
			"asn": float64(20712), "asOrganization": "Andrews & Arnold Ltd",
		},
		"89.160.20.129": {
			"country": "SE", "isEUCountry": "1", "continent": "EU", "city": "Linköping",
			"latitude": "58.41670", "longitude": "15.61670", "timezone": "Europe/Stockholm",
			"region": "Östergötland County", "regionCode": "E",
		},
		"216.160.83.56": {
			"country": "US", "continent": "NA", "city": "Milton", "postalCode": "98354",
			"latitude": "47.25130", "longitude": "-122.31490", "timezone": "America/Los_Angeles",
			"region": "Washington", "regionCode": "WA", "metroCode": "819",
		},
		// An IPv4 address as an IPv6 client of the ingress may write it.
		"::ffff:81.2.69.1": {
			"country": "GB", "continent": "EU", "city": "London", "postalCode": "EC4R",
			"latitude": "51.51420", "longitude": "-0.09310", "timezone": "Europe/London",
			"region": "England", "regionCode": "ENG",
			"asn": float64(20712), "asOrganization": "Andrews & Arnold Ltd",
		},
		// What the database lacks is left out.
		"2001:218:1::1": {"country": "JP", "continent": "AS"},
		// Not in the database: no field at all.
		"8.8.8.8":     {},
		"192.0.2.1":   {},
		"2001:db8::1": {},
	}
	for addr, want := range cases {
		got := decodeCf(t, g.Lookup(netip.MustParseAddr(addr)))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", addr, got, want)
		}
	}
	if got := string(g.Lookup(netip.Addr{})); got != "{}" {
		t.Errorf("no address: got %s, want {}", got)
	}
}

func TestClientAddrIsTheRightmostForwardedEntryElseThePeer(t *testing.T) {
	cases := []struct {
		forwarded []string
		peer      string
		want      string
	}{
		{nil, "81.2.69.160:51000", "81.2.69.160"},
		{nil, "[2001:218::5]:443", "2001:218::5"},
		{[]string{"81.2.69.160"}, "127.0.0.1:4000", "81.2.69.160"},
		// What a client wrote comes first; the ingress appends what it saw.
		{[]string{"216.160.83.56, 81.2.69.160"}, "127.0.0.1:4000", "81.2.69.160"},
		{[]string{"216.160.83.56", "89.160.20.129 "}, "127.0.0.1:4000", "89.160.20.129"},
		{[]string{"203.0.113.9,2001:218::7"}, "127.0.0.1:4000", "2001:218::7"},
		{[]string{"[2001:218::7]:1234"}, "127.0.0.1:4000", "2001:218::7"},
		{[]string{"81.2.69.160:1234"}, "127.0.0.1:4000", "81.2.69.160"},
		{[]string{"fe80::1%eth0"}, "127.0.0.1:4000", "fe80::1"},
		// The ingress's entry is no address: nothing is looked up, never the peer (the ingress).
		{[]string{"81.2.69.160, unknown"}, "127.0.0.1:4000", "invalid IP"},
	}
	for _, c := range cases {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.forwarded {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientAddr(r).String(); got != c.want {
			t.Errorf("%v from %s: got %s, want %s", c.forwarded, c.peer, got, c.want)
		}
	}
}

func TestStampAlwaysRemovesTheClientsBlob(t *testing.T) {
	forged := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.RemoteAddr = "127.0.0.1:4000"
		r.Header.Set("X-Forwarded-For", "8.8.8.8")
		r.Header.Set(CfBlobHeader, `{"country":"XX"}`)
		r.Header[strings.ToLower(CfBlobHeader)] = []string{`{"city":"Forged"}`}
		return r
	}
	// Without a database: the header is gone, nothing takes its place (request.cf as before).
	r := forged()
	(*GeoIP)(nil).Stamp(r)
	for name := range r.Header {
		if strings.EqualFold(name, CfBlobHeader) {
			t.Fatalf("without a database the client's %s reached workerd", name)
		}
	}
	// With one: only the front's own, for an address it does not hold an empty object.
	g := openFixture(t)
	r = forged()
	g.Stamp(r)
	var values []string
	for name, v := range r.Header {
		if strings.EqualFold(name, CfBlobHeader) {
			values = append(values, v...)
		}
	}
	if !reflect.DeepEqual(values, []string{"{}"}) {
		t.Fatalf("with a database, %s is %q, want only {}", CfBlobHeader, values)
	}
	r = forged()
	r.Header.Set("X-Forwarded-For", "8.8.8.8, 81.2.69.160")
	g.Stamp(r)
	if cf := decodeCf(t, []byte(r.Header.Get(CfBlobHeader))); cf["city"] != "London" {
		t.Fatalf("with a database, request.cf is %v", cf)
	}
}

func TestOpenGeoIPRefusesWhatIsNoDatabase(t *testing.T) {
	if g, err := OpenGeoIP(""); g != nil || err != nil {
		t.Fatalf("no path: %v, %v", g, err)
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "GeoLite2-City.mmdb")
	if _, err := OpenGeoIP(missing); err == nil || !strings.Contains(err.Error(), "CELL_GEOIP_DB "+missing+" cannot be opened") {
		t.Fatalf("missing file: %v", err)
	}
	for name, content := range map[string]string{"empty.mmdb": "", "text.mmdb": "country,city\nGB,London\n"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenGeoIP(path); err == nil || !strings.Contains(err.Error(), "is not a MaxMind DB") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
