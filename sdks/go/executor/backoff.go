package executor

import (
	"math/rand/v2"
	"time"
)

// Exponential backoff with jitter, shared by reconnects and callback retries: 100 ms doubling
// up to 5 s, each delay spread ±20 % so many executors do not retry in step.
const (
	backoffInitial = 100 * time.Millisecond
	backoffMax     = 5 * time.Second
)

type backoff struct{ current time.Duration }

func newBackoff() *backoff { return &backoff{current: backoffInitial} }

// next returns the next delay (jittered) and doubles the base up to the cap.
func (b *backoff) next() time.Duration {
	base := b.current
	b.current = min(b.current*2, backoffMax)
	jittered := time.Duration(float64(base) * (0.8 + rand.Float64()*0.4))
	return min(jittered, backoffMax)
}

// reset starts again from the initial delay.
func (b *backoff) reset() { b.current = backoffInitial }
