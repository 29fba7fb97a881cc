"""The pure decision core: world snapshot + now + seed -> Plan. No I/O, no clock, no environment."""
