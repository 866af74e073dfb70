package main

// request.cf from the operator's GeoIP database (docs/runtime.md "Geolocation"):
// with `--geoip-db` (CELL_GEOIP_DB) the front opens a MaxMind DB once, memory-mapped read-only
// and shared (so every front on the node shares its pages with the page cache), looks up each
// request's client address, and hands workerd the fields as JSON in CfBlobHeader, which workerd
// turns into request.cf (the http socket's cfBlobHeader, runtime/src/workerd.ts). Whatever a
// client sent under that name is always removed first: a client never writes request.cf.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// CfBlobHeader is the header workerd reads request.cf from; runtime/src/workerd.ts
// CF_BLOB_HEADER names the same (a test there checks they agree).
const CfBlobHeader = "Cell-Cf-Blob"

// GeoIP is the opened database; a nil *GeoIP is none, and Stamp then only removes the header.
type GeoIP struct {
	db *maxminddb.Reader
}

// OpenGeoIP opens the database at path; "" means none (nil, nil). The error names the setting.
func OpenGeoIP(path string) (*GeoIP, error) {
	if path == "" {
		return nil, nil
	}
	db, err := maxminddb.Open(path)
	if err != nil {
		// A file that cannot be opened or read fails with a *fs.PathError; anything else is
		// the content: empty, truncated, or no MaxMind DB at all.
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			return nil, fmt.Errorf("CELL_GEOIP_DB %s cannot be opened: %v", path, pathErr.Err)
		}
		return nil, fmt.Errorf("CELL_GEOIP_DB %s is not a MaxMind DB (.mmdb): %v", path, err)
	}
	return &GeoIP{db: db}, nil
}

// Close unmaps the database.
func (g *GeoIP) Close() {
	if g != nil {
		_ = g.db.Close()
	}
}

// geoRecord is what is read of a record: the fields of GeoLite2-City, GeoLite2-Country and DB-IP
// City Lite, and of GeoLite2-ASN. Only the English names are decoded, not every language's.
type geoRecord struct {
	City struct {
		Names struct {
			En string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"city"`
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
	Country struct {
		ISOCode           string `maxminddb:"iso_code"`
		IsInEuropeanUnion bool   `maxminddb:"is_in_european_union"`
	} `maxminddb:"country"`
	Location struct {
		Latitude  *float64 `maxminddb:"latitude"`
		Longitude *float64 `maxminddb:"longitude"`
		MetroCode uint     `maxminddb:"metro_code"`
		TimeZone  string   `maxminddb:"time_zone"`
	} `maxminddb:"location"`
	Postal struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"postal"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
		Names   struct {
			En string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"subdivisions"`
	ASN   uint   `maxminddb:"autonomous_system_number"`
	ASOrg string `maxminddb:"autonomous_system_organization"`
}

// cfGeo is request.cf's geographic part as Cloudflare spells it (IncomingRequestCfProperties in
// @cloudflare/workers-types): coordinates and the metro code are strings there too. A field the
// database does not give is left out, as Cloudflare leaves out what it does not know.
type cfGeo struct {
	ASN            uint   `json:"asn,omitempty"`
	ASOrganization string `json:"asOrganization,omitempty"`
	Country        string `json:"country,omitempty"`
	IsEUCountry    string `json:"isEUCountry,omitempty"`
	Continent      string `json:"continent,omitempty"`
	City           string `json:"city,omitempty"`
	PostalCode     string `json:"postalCode,omitempty"`
	Latitude       string `json:"latitude,omitempty"`
	Longitude      string `json:"longitude,omitempty"`
	Timezone       string `json:"timezone,omitempty"`
	Region         string `json:"region,omitempty"`
	RegionCode     string `json:"regionCode,omitempty"`
	MetroCode      string `json:"metroCode,omitempty"`
}

// Lookup is request.cf for one address: the fields found, {} for an address the database does
// not hold (or a database error: a request is never refused for its geolocation).
func (g *GeoIP) Lookup(addr netip.Addr) []byte {
	var rec geoRecord
	if addr.IsValid() {
		_ = g.db.Lookup(addr.Unmap()).Decode(&rec)
	}
	geo := cfGeo{
		ASN:            rec.ASN,
		ASOrganization: rec.ASOrg,
		Country:        rec.Country.ISOCode,
		Continent:      rec.Continent.Code,
		City:           rec.City.Names.En,
		PostalCode:     rec.Postal.Code,
		Timezone:       rec.Location.TimeZone,
	}
	if rec.Country.IsInEuropeanUnion {
		geo.IsEUCountry = "1"
	}
	// Cloudflare gives five decimals ("30.27130").
	if rec.Location.Latitude != nil && rec.Location.Longitude != nil {
		geo.Latitude = strconv.FormatFloat(*rec.Location.Latitude, 'f', 5, 64)
		geo.Longitude = strconv.FormatFloat(*rec.Location.Longitude, 'f', 5, 64)
	}
	if rec.Location.MetroCode != 0 {
		geo.MetroCode = strconv.FormatUint(uint64(rec.Location.MetroCode), 10)
	}
	if len(rec.Subdivisions) > 0 {
		geo.Region, geo.RegionCode = rec.Subdivisions[0].Names.En, rec.Subdivisions[0].ISOCode
	}
	text, _ := json.Marshal(geo)
	return text
}

// Stamp prepares r's headers for workerd: it always removes a CfBlobHeader the client sent, and
// with a database sets it to the client's geolocation (always an object, so request.cf is one).
func (g *GeoIP) Stamp(r *http.Request) {
	delete(r.Header, CfBlobHeader)
	for name := range r.Header {
		// Any spelling the client chose, should a header map not be canonical.
		if strings.EqualFold(name, CfBlobHeader) {
			delete(r.Header, name)
		}
	}
	if g == nil {
		return
	}
	r.Header[CfBlobHeader] = []string{string(g.Lookup(ClientAddr(r)))}
}

// ClientAddr is the client's address: the rightmost entry of X-Forwarded-For, which the ingress
// appended (Caddy and Traefik drop what a client they do not trust sent there), else the peer of
// the connection (a request that reached the port without an ingress). Invalid when the
// rightmost entry is no address.
func ClientAddr(r *http.Request) netip.Addr {
	if values := r.Header.Values("X-Forwarded-For"); len(values) > 0 {
		last := values[len(values)-1]
		if at := strings.LastIndexByte(last, ','); at >= 0 {
			last = last[at+1:]
		}
		return parseAddr(strings.TrimSpace(last))
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return parseAddr(host)
}

// parseAddr reads an address, with or without a port or brackets; invalid when it is none.
func parseAddr(text string) netip.Addr {
	if addr, err := netip.ParseAddr(strings.Trim(text, "[]")); err == nil {
		return addr.WithZone("")
	}
	if ap, err := netip.ParseAddrPort(text); err == nil {
		return ap.Addr().WithZone("")
	}
	return netip.Addr{}
}
