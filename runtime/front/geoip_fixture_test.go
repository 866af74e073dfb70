package main

// The GeoIP fixture: a tiny MaxMind DB written by mmdbwriter (a test-only dependency), committed
// as testdata/geoip-fixture.mmdb so that the integration test (test/geoip.test.ts) needs no Go
// toolchain run of its own, and checked here to be exactly what this generator writes, so the
// file is reproducible: after changing the records, rewrite it with
//
//	GEOIP_FIXTURE_WRITE=1 go test -run TestGeoIPFixtureIsCurrent .
//
// The places are MaxMind's own test networks' (their public test databases use them too).

import (
	"bytes"
	"net"
	"os"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

const geoipFixturePath = "testdata/geoip-fixture.mmdb"

func names(en string) mmdbtype.Map {
	return mmdbtype.Map{"en": mmdbtype.String(en), "de": mmdbtype.String(en + " (de)")}
}

// geoipFixtureRecords: a City record with the ASN fields merged in (as a combined database
// would hold them), one inside the EU, one in the US with a metro code, and one with a country
// only (its other fields must be left out of request.cf).
var geoipFixtureRecords = map[string]mmdbtype.Map{
	"81.2.69.0/24": {
		"city":      mmdbtype.Map{"names": names("London")},
		"continent": mmdbtype.Map{"code": mmdbtype.String("EU"), "names": names("Europe")},
		"country":   mmdbtype.Map{"iso_code": mmdbtype.String("GB"), "names": names("United Kingdom")},
		"location": mmdbtype.Map{
			"latitude": mmdbtype.Float64(51.5142), "longitude": mmdbtype.Float64(-0.0931),
			"time_zone": mmdbtype.String("Europe/London"), "accuracy_radius": mmdbtype.Uint16(10),
		},
		"postal":                         mmdbtype.Map{"code": mmdbtype.String("EC4R")},
		"subdivisions":                   mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String("ENG"), "names": names("England")}},
		"autonomous_system_number":       mmdbtype.Uint32(20712),
		"autonomous_system_organization": mmdbtype.String("Andrews & Arnold Ltd"),
	},
	"89.160.20.0/24": {
		"city":      mmdbtype.Map{"names": names("Linköping")},
		"continent": mmdbtype.Map{"code": mmdbtype.String("EU")},
		"country": mmdbtype.Map{
			"iso_code": mmdbtype.String("SE"), "is_in_european_union": mmdbtype.Bool(true),
		},
		"location": mmdbtype.Map{
			"latitude": mmdbtype.Float64(58.4167), "longitude": mmdbtype.Float64(15.6167),
			"time_zone": mmdbtype.String("Europe/Stockholm"),
		},
		"subdivisions": mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String("E"), "names": names("Östergötland County")}},
	},
	"216.160.83.0/24": {
		"city":      mmdbtype.Map{"names": names("Milton")},
		"continent": mmdbtype.Map{"code": mmdbtype.String("NA")},
		"country":   mmdbtype.Map{"iso_code": mmdbtype.String("US")},
		"location": mmdbtype.Map{
			"latitude": mmdbtype.Float64(47.2513), "longitude": mmdbtype.Float64(-122.3149),
			"metro_code": mmdbtype.Uint16(819), "time_zone": mmdbtype.String("America/Los_Angeles"),
		},
		"postal":       mmdbtype.Map{"code": mmdbtype.String("98354")},
		"subdivisions": mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String("WA"), "names": names("Washington")}},
	},
	"2001:218::/32": {
		"continent": mmdbtype.Map{"code": mmdbtype.String("AS")},
		"country":   mmdbtype.Map{"iso_code": mmdbtype.String("JP")},
	},
}

// geoipFixture is the database's bytes; the same on every run (fixed build time).
func geoipFixture(t *testing.T) []byte {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "Cell-Test-City",
		Description:  map[string]string{"en": "svc's GeoIP test fixture (runtime/front/geoip_fixture_test.go)"},
		Languages:    []string{"en", "de"},
		RecordSize:   24,
		BuildEpoch:   1_700_000_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cidr := range []string{"81.2.69.0/24", "89.160.20.0/24", "216.160.83.0/24", "2001:218::/32"} {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(network, geoipFixtureRecords[cidr]); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := tree.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestGeoIPFixtureIsCurrent(t *testing.T) {
	want := geoipFixture(t)
	if os.Getenv("GEOIP_FIXTURE_WRITE") == "1" {
		if err := os.WriteFile(geoipFixturePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(geoipFixturePath)
	if err != nil {
		t.Fatalf("%v (write it with GEOIP_FIXTURE_WRITE=1)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the generator writes (rewrite it with GEOIP_FIXTURE_WRITE=1)", geoipFixturePath)
	}
}
