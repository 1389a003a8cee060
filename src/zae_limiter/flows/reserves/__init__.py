"""Token reserves: the book of reserves a client holds (book), sized from its demand
(demand), stretched under throttling (stretch), written back at a pace (pacing), and
connected to the acquire and the lease (ops)."""
