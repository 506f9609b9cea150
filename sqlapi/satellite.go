package sqlapi

import "embed"

// SatelliteFS holds the SQL API of a satellite installation (satellite/*.sql), re-applied on
// every install of a satellite; the control's side of satellites is 050_*.sql in FS.
//
//go:embed satellite/*.sql
var SatelliteFS embed.FS
