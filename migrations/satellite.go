package migrations

import "embed"

// SatelliteFS holds the migrations of a satellite installation (satellite/*.up.sql), numbered in
// the satellites' range 050-059 like the control's own satellite files.
//
//go:embed satellite/*.up.sql
var SatelliteFS embed.FS
