package tlsreload

import "time"

// SetClock lets tests step time instead of sleeping.
func (p *Pair) SetClock(now func() time.Time) { p.now = now }
