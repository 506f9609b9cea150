package metrics

import "github.com/prometheus/client_golang/prometheus"

// satelliteGauges are the sidecar's connections to satellite databases (sidecar/internal/satellite).
type satelliteGauges struct {
	open, inUse prometheus.Gauge
}

func newSatelliteGauges() satelliteGauges {
	return satelliteGauges{
		open: gauge("satellite_connections_open",
			"Connections to satellite databases open (in use or idle), all satellites together; at most --satellite-connections."),
		inUse: gauge("satellite_connections_in_use", "Connections to satellite databases running an envelope now."),
	}
}

// SetSatelliteConnections records the satellite connections open and in use.
func (m *Metrics) SetSatelliteConnections(open, inUse int) {
	if m == nil {
		return
	}
	m.satellites.open.Set(float64(open))
	m.satellites.inUse.Set(float64(inUse))
}
