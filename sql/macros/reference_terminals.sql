{#- The service's list of supported US terminals and each one's IANA time zone, as a relation
(`firms_code`, `port_locode`, `time_zone`, `terminal_name`): vendored from the Terminal49 reference data,
`reference/terminal49/terminals.csv` (the same file as `sandbox/reference_data/terminals.csv`), its
columns `Firms Code`, `Port Code`, `Time Zone` and `Terminal Name`, every row in the file's order.
container_status falls back to it for a terminal's time zone when the API sent none. A macro, not a dbt
seed: a seed would be a Dagster asset with no upstream, which the automation (eager) never builds, and
container_status would wait for it. tests/models/test_local_dates.py checks the rows against the file. -#}
{% macro reference_terminals() -%}
    (select * from (values
        ('A321', 'USBAL', 'America/New_York', 'Dundalk Marine Terminal'),
        ('C324', 'USBAL', 'America/New_York', 'Seagirt Terminal'),
        ('A295', 'USBOS', 'America/New_York', 'Paul W Conley Terminal'),
        ('S787', 'USHOU', 'America/Chicago', 'Barbours Cut Terminal'),
        ('V136', 'USHOU', 'America/Chicago', 'Bayport Container Terminal'),
        ('N296', 'USJAX', 'America/New_York', 'SSA Cooper'),
        ('M029', 'USJAX', 'America/New_York', 'Trapac Jacksonville Terminal'),
        ('W183', 'USLGB', 'America/Los_Angeles', 'Long Beach Container Terminal'),
        ('WAC8', 'USLGB', 'America/Los_Angeles', 'Long Beach Container Terminal'),
        ('Z952', 'USLGB', 'America/Los_Angeles', 'Total Terminals International'),
        ('Y309', 'USLGB', 'America/Los_Angeles', 'International Transportation Service'),
        ('W182', 'USLGB', 'America/Los_Angeles', 'Pacific Container Terminal'),
        ('Z978', 'USLGB', 'America/Los_Angeles', 'SSA Pier A'),
        ('W185', 'USLAX', 'America/Los_Angeles', 'APM Terminals'),
        ('Y257', 'USLAX', 'America/Los_Angeles', 'Fenix Marine Services'),
        ('Y773', 'USLAX', 'America/Los_Angeles', 'West Basin Container Terminal'),
        ('Y124', 'USLAX', 'America/Los_Angeles', 'Everport Terminal Serivces'),
        ('Y258', 'USLAX', 'America/Los_Angeles', 'TraPac LA'),
        ('Y790', 'USLAX', 'America/Los_Angeles', 'Yusen Terminals'),
        ('L239', 'USMIA', 'America/New_York', 'Port of Miami Terminal Operating Company'),
        ('N775', 'USMIA', 'America/New_York', 'South Florida Container Terminal'),
        ('R103', 'USMOB', 'America/Chicago', 'APM Terminal'),
        ('P260', 'USMSY', 'America/Chicago', 'Napoleon Container Terminal'),
        ('Q795', 'USMSY', 'America/Chicago', 'New Orleans Terminal'),
        ('E425', 'USNYC', 'America/New_York', 'Port Elizabeth'),
        ('E005', 'USNYC', 'America/New_York', 'GCT New York LP'),
        ('E416', 'USNYC', 'America/New_York', 'Maher Terminals'),
        ('E364', 'USNYC', 'America/New_York', 'GCT Bayonne'),
        ('F577', 'USNYC', 'America/New_York', 'Port Newark Container Terminal'),
        ('Z985', 'USOAK', 'America/Los_Angeles', 'Oakland International Container Terminal'),
        ('Y549', 'USOAK', 'America/Los_Angeles', 'TraPac Terminal'),
        ('Y738', 'USOAK', 'America/Los_Angeles', 'Ben E. Nutter Terminal'),
        ('C095', 'USPHL', 'America/New_York', 'Packer Avenue'),
        ('N751', 'USPEF', 'America/New_York', 'Florida International Terminal'),
        ('M669', 'USPOT', 'America/New_York', 'Tampa Bay Container Terminal'),
        ('L737', 'USSAV', 'America/New_York', 'Garden City Terminals'),
        ('X117', 'USSEA', 'America/Los_Angeles', 'SSA Terminal 18'),
        ('Y197', 'USSEA', 'America/Los_Angeles', 'SSA Terminal 30'),
        ('X215', 'USTIW', 'America/Los_Angeles', 'Pierce County Terminal'),
        ('Z693', 'USTIW', 'America/Los_Angeles', 'Husky Terminal'),
        ('Z705', 'USTIW', 'America/Los_Angeles', 'Washington United Terminals'),
        ('WAM2', 'USTIW', 'America/Los_Angeles', 'Tacoma Container Terminal'),
        ('LAQ4', 'USORF', 'America/New_York', 'Richmond Marine Terminal'),
        ('L045', 'USORF', 'America/New_York', 'Portsmouth Marine Terminal'),
        ('N195', 'USORF', 'America/New_York', 'Virginia International Gateway'),
        ('L005', 'USORF', 'America/New_York', 'Norfolk International Terminals')
    ) as reference_terminals(firms_code, port_locode, time_zone, terminal_name))
{%- endmacro %}
